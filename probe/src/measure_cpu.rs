//! Runs the CPU probe's generated micro-benchmarks and turns their output
//! into [`CpuParams`].

use crate::cpu::{
    Associativity, Bandwidth, CoreClock, CpuPair, CpuParams, Documented, ExecutionContexts,
    FmaCheck, FpOp, FpTiming, RegisterCount, SharedCache, Source, WaysMethod, Width,
};
use crate::cpusource::{
    cpubench_source, live_kernel_name, stack_traffic, CpuBenchParams, LIVE_ISAS,
};
use crate::documented::{self, DocumentedCache, Features};
use crate::rows::{num, run_rows};
use crate::stats::enforce_monotonic;
use crate::{CacheLevel, ProbeError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The compiled CPU probe and what its compiler did with the live-value
/// kernels.
pub(crate) struct CpuBench {
    exe: PathBuf,
    /// Vector-register stack accesses per generated function.
    stack_traffic: BTreeMap<String, usize>,
    params: CpuBenchParams,
}

impl CpuBench {
    /// Compiles to assembly first (the live-value kernels' spills are read
    /// from it), then assembles and links that same code.
    pub(crate) fn build(
        dir: &Path,
        cc: &toolchain::CCompiler,
        cache: Option<&toolchain::BuildCache>,
    ) -> Result<CpuBench, ProbeError> {
        let params = CpuBenchParams::default();
        let src = crate::csource::write_program(dir, "tdg_cpu.c", &cpubench_source(&params))
            .map_err(ProbeError::Io)?;
        let asm = dir.join("tdg_cpu.s");
        // The assembly through the build cache, as an object would be: -S
        // stops gcc and clang before the -c a cached job also passes.
        cc.compile_object(
            &toolchain::CompileJob {
                sources: vec![src],
                output: asm.clone(),
                // No vectorisation or contraction beyond what each kernel's
                // intrinsics say: each statement is the instruction it names.
                cflags: [
                    "-O2",
                    "-std=c11",
                    "-S",
                    "-fno-tree-vectorize",
                    "-ffp-contract=off",
                ]
                .map(String::from)
                .to_vec(),
                include_dirs: vec![dir.to_path_buf()],
                object_only: true,
                ..Default::default()
            },
            cache,
        )?;
        let text = std::fs::read_to_string(&asm).map_err(ProbeError::Io)?;
        let exe = dir.join("tdg_cpu");
        cc.compile(&toolchain::CompileJob {
            sources: vec![asm],
            output: exe.clone(),
            link_args: vec!["-pthread".into()],
            ..Default::default()
        })?;
        Ok(CpuBench {
            exe,
            stack_traffic: stack_traffic(&text),
            params,
        })
    }

    fn run(&self, args: &[String]) -> Result<Vec<Vec<String>>, ProbeError> {
        run_rows(&self.exe, args, RUN_LIMIT)
    }
}

/// The widths this CPU runs, and whether it has FMA.
pub(crate) fn widths(f: &Features) -> Vec<Width> {
    let mut w = Vec::new();
    if f.sse2 {
        w.extend([Width::Scalar, Width::Sse2]);
    }
    if f.avx {
        w.push(Width::Avx2);
    }
    if f.avx512f {
        w.push(Width::Avx512);
    }
    w
}

/// What the memory side of the probe found, which the CPU side builds on.
pub(crate) struct MemoryFacts<'a> {
    pub line: u64,
    pub caches: &'a [CacheLevel],
    pub documented: &'a [DocumentedCache],
    pub tsc_ghz: Option<f64>,
    pub sysfs_cpu_root: &'a Path,
}

pub(crate) fn measure_cpu(
    bench: &CpuBench,
    facts: &MemoryFacts<'_>,
    progress: &mut dyn FnMut(&str),
) -> Result<CpuParams, ProbeError> {
    let features = documented::features();
    let (vendor, family, model) = documented::cpu_identity();
    let uarch = crate::vendor::lookup(&vendor, family, model);

    progress("core clock (dependent integer adds)");
    let core_clock = measure_clock(bench, facts)?;

    progress("floating-point latency and throughput");
    let fp = measure_fp(bench, &features, uarch)?;

    let fma = measure_fma(bench, &features, &fp)?;

    progress("usable floating-point registers (live-value kernels)");
    let fp_registers = measure_registers(bench, &features, uarch)?;

    progress("L1d and L2 associativity (conflicting addresses)");
    let (l1d_ways, l2_ways) = measure_ways(bench, facts)?;

    progress("execution contexts and memory bandwidth");
    let contexts = measure_contexts(bench, facts)?;

    Ok(CpuParams {
        vendor,
        family,
        model,
        microarchitecture: uarch.map(|u| u.name.to_string()),
        core_clock,
        fp,
        fma,
        fp_registers,
        l1d_ways,
        l2_ways,
        contexts: Some(contexts),
        duration_s: 0.0,
    })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn measure_clock(
    bench: &CpuBench,
    facts: &MemoryFacts<'_>,
) -> Result<Option<CoreClock>, ProbeError> {
    let rows = bench.run(&["clock".into()])?;
    let ns: Vec<f64> = rows
        .iter()
        .map(|r| num("clock", r, 0))
        .collect::<Result<_, _>>()?;
    let Some(ns_per_cycle) = median(ns).filter(|&n| n > 0.0) else {
        return Ok(None);
    };
    let ghz = 1.0 / ns_per_cycle;
    let documented = documented::documented_core_ghz(&facts.sysfs_cpu_root.join("cpu0"));
    Ok(Some(CoreClock {
        measured_ghz: ghz,
        per_tsc_tick: facts.tsc_ghz.filter(|&t| t > 0.0).map(|t| ghz / t),
        documented_ghz: match documented {
            Some((v, src)) => Documented::by(src, Some(v)),
            None => Documented::none(),
        },
    }))
}

/// One line of the `fp` mode: op, width, chains, ns per op, ns per cycle.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FpPoint {
    pub op: String,
    pub width: String,
    pub chains: u32,
    pub cycles: f64,
}

fn run_fp(bench: &CpuBench, pairs: &[(&str, Width)]) -> Result<Vec<FpPoint>, ProbeError> {
    let mut args = vec!["fp".to_string()];
    for (op, w) in pairs {
        args.push(op.to_string());
        args.push(w.name().to_string());
    }
    bench
        .run(&args)?
        .iter()
        .map(|r| {
            let ns: f64 = num("fp", r, 3)?;
            let cycle: f64 = num("fp", r, 4)?;
            Ok(FpPoint {
                op: num("fp", r, 0)?,
                width: num("fp", r, 1)?,
                chains: num("fp", r, 2)?,
                cycles: ns / cycle,
            })
        })
        .collect()
}

/// Latency (one chain) and reciprocal throughput (the fewest chains within
/// 3% of the fastest) of one operation's points.
pub(crate) fn timing_of(points: &[&FpPoint]) -> Option<(f64, f64, u32)> {
    let latency = points.iter().find(|p| p.chains == 1)?.cycles;
    let best = points
        .iter()
        .map(|p| p.cycles)
        .fold(f64::INFINITY, f64::min);
    let at = points
        .iter()
        .filter(|p| p.cycles <= best * 1.03)
        .map(|p| p.chains)
        .min()?;
    Some((latency, best, at))
}

fn fp_ops(features: &Features) -> Vec<FpOp> {
    FpOp::ALL
        .into_iter()
        .filter(|&op| op != FpOp::Fma || features.fma)
        .collect()
}

fn measure_fp(
    bench: &CpuBench,
    features: &Features,
    uarch: Option<&crate::vendor::Microarchitecture>,
) -> Result<Vec<FpTiming>, ProbeError> {
    let mut pairs = Vec::new();
    for w in widths(features) {
        for op in fp_ops(features) {
            pairs.push((op.name(), w));
        }
    }
    let points = run_fp(bench, &pairs)?;
    let mut out = Vec::new();
    for (op_name, w) in &pairs {
        let mine: Vec<&FpPoint> = points
            .iter()
            .filter(|p| p.op == *op_name && p.width == w.name())
            .collect();
        let op = FpOp::ALL
            .into_iter()
            .find(|o| o.name() == *op_name)
            .expect("pairs are built from FpOp::ALL");
        let Some((latency, recip, chains)) = timing_of(&mine) else {
            return Err(ProbeError::Output {
                mode: "fp".into(),
                line: format!("no points for {op_name} at {}", w.name()),
            });
        };
        out.push(FpTiming {
            op,
            width: *w,
            latency_cycles: latency,
            recip_throughput_cycles: recip,
            chains,
            documented_latency_cycles: Documented::by(
                Source::Vendor,
                uarch.map(|u| f64::from(u.latency(op))),
            ),
        });
    }
    Ok(out)
}

fn measure_fma(
    bench: &CpuBench,
    features: &Features,
    fp: &[FpTiming],
) -> Result<FmaCheck, ProbeError> {
    let documented = Documented::by(Source::Cpuid, Some(features.fma));
    if !features.fma {
        return Ok(FmaCheck {
            documented,
            fused: None,
            fma_latency_cycles: None,
            mul_then_add_latency_cycles: None,
        });
    }
    let rows = bench.run(&["fused".into()])?;
    let row = rows.first().cloned().unwrap_or_default();
    let fused_result: f64 = num("fused", &row, 1)?;
    let separate_result: f64 = num("fused", &row, 2)?;
    // The exact a*b+c is -2^-60; rounding the product first gives 0.
    let exact = -(2f64.powi(-60));
    let fused = fused_result == exact && separate_result == 0.0;
    let separate = run_fp(bench, &[("muladd", Width::Scalar)])?;
    Ok(FmaCheck {
        documented,
        fused: Some(fused),
        fma_latency_cycles: fp
            .iter()
            .find(|t| t.op == FpOp::Fma && t.width == Width::Scalar)
            .map(|t| t.latency_cycles),
        mul_then_add_latency_cycles: separate.first().map(|p| p.cycles),
    })
}

/// Registers from the live-value kernels' compiled code: the first count
/// of live values the compiler had to spill to the stack, less one.
pub(crate) fn registers_from_spills(spilled: &[(u32, bool)]) -> Option<u32> {
    let mut sorted = spilled.to_vec();
    sorted.sort();
    let first = sorted.iter().find(|(_, s)| *s)?.0;
    // Every smaller count must have fitted: a kernel that fits after one
    // that spilled means the compiler did something else than run out.
    sorted
        .iter()
        .filter(|(k, _)| *k < first)
        .all(|(_, s)| !s)
        .then_some(first.saturating_sub(1))
}

fn measure_registers(
    bench: &CpuBench,
    features: &Features,
    uarch: Option<&crate::vendor::Microarchitecture>,
) -> Result<Vec<RegisterCount>, ProbeError> {
    let mut out = Vec::new();
    for isa in LIVE_ISAS {
        if isa == Width::Avx512 && !features.avx512f {
            continue;
        }
        let spilled: Vec<(u32, bool)> = bench
            .params
            .live_values
            .clone()
            .map(|k| {
                let name = live_kernel_name(isa, k);
                (k, bench.stack_traffic.get(&name).copied().unwrap_or(0) > 0)
            })
            .collect();
        let Some(measured) = registers_from_spills(&spilled) else {
            continue;
        };
        // Run the kernels at the step, so the count is of code this CPU
        // executes: cycles per operation where the last value fits and where
        // the first one spills.
        let rows = bench.run(&["live".into(), isa.name().into()])?;
        let mut cycles = Vec::new();
        for r in &rows {
            let k: u32 = num("live", r, 1)?;
            let ns: f64 = num("live", r, 2)?;
            let cycle: f64 = num("live", r, 3)?;
            cycles.push((k, ns / cycle));
        }
        out.push(RegisterCount {
            isa,
            measured,
            documented: Documented::by(Source::Vendor, uarch.and_then(|u| u.registers_for(isa))),
            cycles_per_op: cycles,
        });
    }
    Ok(out)
}

/// Addresses per set tried for associativity; past every L1d and L2 the
/// fleet has (L2 up to 20 ways), with points left for the plateau beyond.
const WAYS_MAX: u32 = 32;
/// Cache sets each conflict group is repeated in, so a victim buffer or one
/// odd set cannot pass for extra ways (BlackjackBench).
const WAYS_SETS: u32 = 4;

/// The last count of conflicting addresses whose (monotonic) latency stays
/// below the geometric mean of `fits_ns` (all hits in the level) and the
/// plateau after the step (the median of the last four points). `None`
/// when that plateau is not at least 1.3x `fits_ns`: no step.
pub(crate) fn ways_from_curve(curve: &[(u32, f64)], fits_ns: f64) -> Option<u32> {
    if curve.len() < 6 || fits_ns.is_nan() || fits_ns <= 0.0 {
        return None;
    }
    let ys: Vec<f64> = curve.iter().map(|p| p.1).collect();
    let mono = enforce_monotonic(&ys);
    let tail = median(ys[ys.len() - 4..].to_vec())?;
    if tail < 1.3 * fits_ns {
        return None;
    }
    let threshold = (fits_ns * tail).sqrt();
    curve
        .iter()
        .zip(&mono)
        .take_while(|(_, &m)| m <= threshold)
        .last()
        .map(|(p, _)| p.0)
}

fn run_ways(
    bench: &CpuBench,
    stride: u64,
    line: u64,
) -> Result<(Vec<(u32, f64)>, i64), ProbeError> {
    let rows = bench.run(&[
        "ways".into(),
        stride.to_string(),
        WAYS_SETS.to_string(),
        WAYS_MAX.to_string(),
        line.to_string(),
    ])?;
    let mut curve = Vec::new();
    let mut thp_kb = -1i64;
    for r in &rows {
        curve.push((num("ways", r, 0)?, num("ways", r, 1)?));
        thp_kb = num("ways", r, 2)?;
    }
    Ok((curve, thp_kb))
}

/// A stride that maps every address to one set: any multiple of the way
/// size, and a cache's size rounded up to a power of two is one.
fn conflict_stride(level: usize, facts: &MemoryFacts<'_>) -> Option<u64> {
    let data = documented::data_caches(facts.documented);
    let size = [
        data.get(level).map(|c| c.size_bytes),
        facts.caches.get(level).map(|c| c.effective_bytes),
    ]
    .into_iter()
    .flatten()
    .max()?;
    Some(size.next_power_of_two())
}

fn documented_ways(level: usize, facts: &MemoryFacts<'_>) -> Documented<u32> {
    let data = documented::data_caches(facts.documented);
    Documented::by(
        Source::Sysfs,
        data.get(level)
            .and_then(|c| c.ways)
            .and_then(|w| u32::try_from(w).ok()),
    )
}

fn measure_ways(
    bench: &CpuBench,
    facts: &MemoryFacts<'_>,
) -> Result<(Option<Associativity>, Option<Associativity>), ProbeError> {
    let Some(l1_stride) = conflict_stride(0, facts) else {
        return Ok((None, None));
    };
    let (l1_curve, _) = run_ways(bench, l1_stride, facts.line)?;
    // While every address fits, each access is an L1 hit: the first points.
    let l1_hit = l1_curve
        .iter()
        .take(4)
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min);
    let l1_measured = ways_from_curve(&l1_curve, l1_hit);
    let l1 = Associativity {
        measured: l1_measured,
        documented: documented_ways(0, facts),
        note: l1_measured.is_none().then(|| {
            "no step on the conflict curve (a disturbed run, or an L1d not indexed by page-offset bits)"
                .to_string()
        }),
        method: WaysMethod::ConflictStride {
            stride_bytes: l1_stride,
            curve: l1_curve,
        },
    };
    let Some(l2_size) = conflict_stride(1, facts) else {
        return Ok((Some(l1), None));
    };
    Ok((Some(l1), Some(measure_l2_ways(bench, facts, l2_size)?)))
}

/// Targets an L2 eviction set is built for; the size most of them agree on
/// is the answer.
const EVICTION_TARGETS: u32 = 3;

/// The answer most eviction sets agree on: a size at least two targets
/// found, the smaller on a tie; `None` without such agreement.
pub(crate) fn agreed_size(sizes: &[u32]) -> Option<u32> {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for &s in sizes.iter().filter(|&&s| s > 0) {
        *counts.entry(s).or_default() += 1;
    }
    counts
        .iter()
        .filter(|(_, &n)| n >= 2)
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(&s, _)| s)
}

fn measure_l2_ways(
    bench: &CpuBench,
    facts: &MemoryFacts<'_>,
    l2_bytes: u64,
) -> Result<Associativity, ProbeError> {
    let page = documented::page_size();
    // Every line of four L2s: each set holds four times its ways of them
    // whatever the index is made of.
    let pool = 4 * l2_bytes;
    let rows = bench.run(&[
        "evict".into(),
        pool.to_string(),
        facts.line.to_string(),
        page.to_string(),
        (2 * l2_bytes).to_string(),
        EVICTION_TARGETS.to_string(),
    ])?;
    let mut hit_ticks = 0;
    let mut next_level_ticks = 0;
    let mut sizes = Vec::new();
    for r in &rows {
        match r.first().map(String::as_str) {
            Some("hit") => hit_ticks = num("evict", r, 1)?,
            Some("next") => next_level_ticks = num("evict", r, 1)?,
            Some("set") => sizes.push(num("evict", r, 1)?),
            _ => {
                return Err(ProbeError::Output {
                    mode: "evict".into(),
                    line: r.join(" "),
                })
            }
        }
    }
    let measured = agreed_size(&sizes);
    let note = if next_level_ticks <= hit_ticks {
        Some(format!(
            "a line pushed out of the L2 reloaded no slower ({next_level_ticks} ticks) than one held in it ({hit_ticks})"
        ))
    } else if !sizes.is_empty() && sizes.iter().all(|&s| s == 0) {
        Some(format!(
            "not measured: every line of {} read {} times did not push a target line out of the L2 (reload {hit_ticks} ticks when held, {next_level_ticks} when pushed out by a plain read)",
            stats::bytes(pool),
            bench.params.evict_passes
        ))
    } else if measured.is_none() {
        Some(format!(
            "the eviction sets of {EVICTION_TARGETS} lines disagree ({sizes:?}): a disturbed run"
        ))
    } else {
        None
    };
    Ok(Associativity {
        measured,
        documented: documented_ways(1, facts),
        method: WaysMethod::EvictionSets {
            pool_lines: u32::try_from(pool / facts.line).unwrap_or(u32::MAX),
            sizes,
            hit_ticks,
            next_level_ticks,
        },
        note,
    })
}

/// Slowdown beyond which two CPUs are said to share a cache level.
const SHARED_CACHE_SLOWDOWN: f64 = 1.25;
/// Per-CPU throughput together against alone below which two CPUs are two
/// contexts of one core (about 0.5 for a saturating kernel).
const SHARED_CORE_RATIO: f64 = 0.75;
/// Rounds of the pair measurement; each figure is the best of them.
const PAIR_ROUNDS: usize = 3;
/// Partners the first CPU is tested with: enough to meet a sibling, a CPU
/// on the same last-level cache and one elsewhere, few enough to stay cheap.
const MAX_PAIRS: usize = 3;

/// Which CPUs to pair with `first`: sysfs's SMT sibling and a CPU on the
/// same last-level cache and one elsewhere, when tdg may use them, then
/// the rest in order.
pub(crate) fn partners(first: u32, allowed: &[u32], sharing: &documented::Sharing) -> Vec<u32> {
    let others: Vec<u32> = allowed.iter().copied().filter(|&c| c != first).collect();
    let mut picked: Vec<u32> = Vec::new();
    let pick = |c: Option<u32>, picked: &mut Vec<u32>| {
        if let Some(c) = c {
            if !picked.contains(&c) && picked.len() < MAX_PAIRS {
                picked.push(c);
            }
        }
    };
    let sibling = sharing
        .core_siblings
        .as_ref()
        .and_then(|s| others.iter().copied().find(|c| s.contains(c)));
    pick(sibling, &mut picked);
    if let Some((_, llc)) = sharing.caches.last() {
        pick(
            others
                .iter()
                .copied()
                .find(|c| llc.contains(c) && Some(*c) != sibling),
            &mut picked,
        );
        pick(
            others.iter().copied().find(|c| !llc.contains(c)),
            &mut picked,
        );
    }
    for c in others {
        pick(Some(c), &mut picked);
    }
    picked
}

/// Which CPUs share a core or a cache with the first allowed one, and the
/// memory bandwidth from one CPU and from all.
fn measure_contexts(
    bench: &CpuBench,
    facts: &MemoryFacts<'_>,
) -> Result<ExecutionContexts, ProbeError> {
    let cpus = documented::allowed_cpus();
    let first = cpus.first().copied().unwrap_or(0);
    let sharing = documented::sharing(facts.sysfs_cpu_root, first);
    // Each CPU chases three quarters of a level's effective size: alone it
    // fits, together they overflow it when they share it.
    let levels: Vec<(u32, u64)> = facts
        .caches
        .iter()
        .skip(1)
        .map(|c| {
            (
                c.level,
                (c.effective_bytes * 3 / 4) / facts.line * facts.line,
            )
        })
        .collect();
    let pairs = partners(first, &cpus, &sharing)
        .into_iter()
        .map(|other| measure_pair(bench, facts.line, [first, other], &levels, &sharing))
        .collect::<Result<Vec<_>, _>>()?;
    let bandwidth = measure_bandwidth(bench, facts, &cpus)?;
    Ok(ExecutionContexts {
        cpus,
        pairs,
        bandwidth,
    })
}

/// What a pair's rounds measured: the best compute ratio (alone over
/// together) and each buffer's least slowdown (together over alone), in
/// the order the buffers first appear.
struct PairFigures {
    compute_ratio: Option<f64>,
    slowdowns: Vec<(u64, f64)>,
}

/// Reads the `pair` mode's rows: `compute ALONE TOGETHER` and
/// `chase BYTES ALONE TOGETHER`, keeping the best of the rounds.
fn pair_figures(rows: &[Vec<String>]) -> Result<PairFigures, ProbeError> {
    let mut compute_ratio: Option<f64> = None;
    let mut slowdowns: Vec<(u64, f64)> = Vec::new();
    for r in rows {
        match r.first().map(String::as_str) {
            Some("compute") => {
                let alone: f64 = num("pair", r, 1)?;
                let together: f64 = num("pair", r, 2)?;
                let ratio = alone / together;
                compute_ratio = Some(compute_ratio.map_or(ratio, |best| best.max(ratio)));
            }
            Some("chase") => {
                let bytes: u64 = num("pair", r, 1)?;
                let alone: f64 = num("pair", r, 2)?;
                let together: f64 = num("pair", r, 3)?;
                let slowdown = together / alone;
                match slowdowns.iter_mut().find(|(b, _)| *b == bytes) {
                    Some(seen) if slowdown < seen.1 => seen.1 = slowdown,
                    Some(_) => {}
                    None => slowdowns.push((bytes, slowdown)),
                }
            }
            _ => {
                return Err(ProbeError::Output {
                    mode: "pair".into(),
                    line: r.join(" "),
                })
            }
        }
    }
    Ok(PairFigures {
        compute_ratio,
        slowdowns,
    })
}

/// Two CPUs computing, then chasing each level's buffer, alone and
/// together: whether they share a core (compute slows down) and which
/// caches (chasing slows down), beside what sysfs says.
fn measure_pair(
    bench: &CpuBench,
    line: u64,
    cpus: [u32; 2],
    levels: &[(u32, u64)],
    sharing: &documented::Sharing,
) -> Result<CpuPair, ProbeError> {
    let other = cpus[1];
    let mut args = vec![
        "pair".to_string(),
        cpus[0].to_string(),
        other.to_string(),
        line.to_string(),
    ];
    args.extend(levels.iter().map(|(_, b)| b.to_string()));
    // A VM's two vCPUs may for a while be time-sliced on one physical
    // core by the host: both then slow each other down as siblings
    // would. Other tenants only ever make the pair slower together, so
    // each figure is the best of a few rounds spread over time: a
    // sibling slows the other down in every round, a passing placement
    // in some.
    let mut rows = Vec::new();
    for _ in 0..PAIR_ROUNDS {
        rows.extend(bench.run(&args)?);
    }
    let figures = pair_figures(&rows)?;
    let Some(compute_ratio) = figures.compute_ratio else {
        return Err(ProbeError::Output {
            mode: "pair".into(),
            line: "no compute line".into(),
        });
    };
    let caches = figures
        .slowdowns
        .into_iter()
        .map(|(bytes, slowdown)| {
            let level = levels
                .iter()
                .find(|(_, b)| *b == bytes)
                .map_or(0, |(l, _)| *l);
            SharedCache {
                level,
                buffer_bytes: bytes,
                slowdown,
                shared: slowdown >= SHARED_CACHE_SLOWDOWN,
                documented_shared: Documented::by(
                    Source::Sysfs,
                    sharing
                        .caches
                        .iter()
                        .find(|(l, _)| *l == level)
                        .map(|(_, list)| list.contains(&other)),
                ),
            }
        })
        .collect();
    Ok(CpuPair {
        cpus,
        compute_ratio,
        shares_core: compute_ratio < SHARED_CORE_RATIO,
        documented_shares_core: Documented::by(
            Source::Sysfs,
            sharing.core_siblings.as_ref().map(|s| s.contains(&other)),
        ),
        caches,
    })
}

/// Reading a buffer well past the last-level cache from one CPU, then
/// from all of them at once.
fn measure_bandwidth(
    bench: &CpuBench,
    facts: &MemoryFacts<'_>,
    cpus: &[u32],
) -> Result<Option<Bandwidth>, ProbeError> {
    let llc = documented::data_caches(facts.documented)
        .last()
        .map(|c| c.size_bytes)
        .into_iter()
        .chain(facts.caches.last().map(|c| c.effective_bytes))
        .max()
        .unwrap_or(32 << 20);
    let buffer = (4 * llc).clamp(64 << 20, 1 << 30);
    let readers: Vec<u32> = cpus.iter().copied().take(256).collect();
    let mut args = vec!["bandwidth".to_string(), buffer.to_string()];
    args.extend(readers.iter().map(u32::to_string));
    let rows = bench.run(&args)?;
    let mut one = None;
    let mut all = None;
    for r in &rows {
        match r.first().map(String::as_str) {
            Some("one") => one = Some(num::<f64>("bandwidth", r, 1)?),
            Some("all") => all = Some(num::<f64>("bandwidth", r, 1)?),
            _ => {}
        }
    }
    Ok(match (one, all) {
        (Some(one), Some(all)) => Some(Bandwidth {
            buffer_bytes: buffer,
            one_cpu_gb_s: one,
            all_cpus_gb_s: all,
            cpus: readers.len() as u32,
        }),
        _ => None,
    })
}

/// The CPU values `tdg probe --check` and the repeat after a probe
/// re-measure: scalar latencies and both associativities.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuRepeat {
    pub latency_cycles: Vec<(FpOp, f64)>,
    pub l1d_ways: Option<u32>,
    pub l2_ways: Option<u32>,
}

pub(crate) fn remeasure_cpu(
    bench: &CpuBench,
    facts: &MemoryFacts<'_>,
) -> Result<CpuRepeat, ProbeError> {
    let features = documented::features();
    let ops = fp_ops(&features);
    let pairs: Vec<(&str, Width)> = ops.iter().map(|o| (o.name(), Width::Scalar)).collect();
    let points = run_fp(bench, &pairs)?;
    let latency_cycles = ops
        .iter()
        .filter_map(|&op| {
            points
                .iter()
                .find(|p| p.op == op.name() && p.chains == 1)
                .map(|p| (op, p.cycles))
        })
        .collect();
    let (l1, l2) = measure_ways(bench, facts)?;
    Ok(CpuRepeat {
        latency_cycles,
        l1d_ways: l1.and_then(|a| a.measured),
        l2_ways: l2.and_then(|a| a.measured),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(ys: &[f64]) -> Vec<(u32, f64)> {
        ys.iter()
            .enumerate()
            .map(|(i, &y)| (i as u32 + 1, y))
            .collect()
    }

    #[test]
    fn ways_are_the_last_count_below_the_step() {
        // 8 ways: L1 hits, then L2 hits.
        let mut ys = vec![1.1; 8];
        ys.extend(vec![3.8; 16]);
        assert_eq!(ways_from_curve(&curve(&ys), 1.1), Some(8));
        // Noise only adds: a slow point inside the level, and the first
        // point past the step slower than the rest (seen: 5.07 ns at 9
        // addresses, 3.95 ns from 10 on).
        ys[3] = 2.5;
        ys[8] = 5.07;
        assert_eq!(ways_from_curve(&curve(&ys), 1.1), Some(8));
        // An L2 curve: L1 hits up to 12, L2 hits to 16, then L3.
        let mut ys = vec![1.1; 12];
        ys.extend(vec![3.8; 4]);
        ys.extend(vec![12.0; 16]);
        assert_eq!(ways_from_curve(&curve(&ys), 3.8), Some(16));
        // No step: nothing to report.
        assert_eq!(ways_from_curve(&curve(&[1.0; 24]), 1.0), None);
    }

    #[test]
    fn the_eviction_set_size_is_the_one_most_targets_agree_on() {
        assert_eq!(agreed_size(&[8, 8, 7]), Some(8));
        assert_eq!(agreed_size(&[16, 0, 16]), Some(16));
        assert_eq!(agreed_size(&[8, 7, 0]), None);
        assert_eq!(agreed_size(&[0, 0, 0]), None);
        assert_eq!(agreed_size(&[7, 7, 8, 8]), Some(7));
    }

    #[test]
    fn registers_are_the_last_count_before_the_first_spill() {
        let spills: Vec<(u32, bool)> = (8..=40).map(|k| (k, k > 16)).collect();
        assert_eq!(registers_from_spills(&spills), Some(16));
        assert_eq!(registers_from_spills(&[(8, false), (9, false)]), None);
        // A spill below a count that fitted is not a register limit.
        assert_eq!(
            registers_from_spills(&[(8, false), (9, true), (10, false), (11, true)]),
            Some(8)
        );
        let odd = [(8, true), (9, false), (10, true)];
        assert_eq!(registers_from_spills(&odd), Some(7));
    }

    #[test]
    fn timing_takes_one_chain_as_latency_and_the_fewest_chains_at_full_rate() {
        let p = |chains, cycles| FpPoint {
            op: "add".into(),
            width: "scalar".into(),
            chains,
            cycles,
        };
        let pts = [
            p(1, 3.0),
            p(2, 1.5),
            p(4, 0.75),
            p(6, 0.505),
            p(8, 0.5),
            p(12, 0.5),
        ];
        let refs: Vec<&FpPoint> = pts.iter().collect();
        assert_eq!(timing_of(&refs), Some((3.0, 0.5, 6)));
    }

    #[test]
    fn a_pair_keeps_each_figures_best_round_and_refuses_other_lines() {
        let rows = |lines: &[&str]| -> Vec<Vec<String>> {
            lines
                .iter()
                .map(|l| l.split(' ').map(String::from).collect())
                .collect()
        };
        let f = pair_figures(&rows(&[
            "compute 1.0 2.0",
            "chase 4096 10.0 30.0",
            "chase 8192 10.0 12.0",
            "compute 1.0 1.25",
            "chase 4096 10.0 15.0",
            "chase 8192 10.0 20.0",
        ]))
        .unwrap();
        assert_eq!(f.compute_ratio, Some(0.8));
        assert_eq!(f.slowdowns, vec![(4096, 1.5), (8192, 1.2)]);
        assert!(pair_figures(&rows(&["compute 1.0 2.0", "spin 1"])).is_err());
        assert_eq!(
            pair_figures(&rows(&["chase 64 1 2"]))
                .unwrap()
                .compute_ratio,
            None
        );
    }

    #[test]
    fn partners_meet_the_sibling_the_llc_and_elsewhere_first() {
        let sharing = documented::Sharing {
            core_siblings: Some(vec![0, 8]),
            caches: vec![(1, vec![0, 8]), (3, vec![0, 1, 2, 3, 8, 9, 10, 11])],
        };
        let allowed: Vec<u32> = (0..16).collect();
        assert_eq!(partners(0, &allowed, &sharing), vec![8, 1, 4]);
        // Two CPUs, no SMT: the other one.
        let two = documented::Sharing {
            core_siblings: Some(vec![0]),
            caches: vec![(3, vec![0, 1])],
        };
        assert_eq!(partners(0, &[0, 1], &two), vec![1]);
        assert!(partners(0, &[0], &two).is_empty());
    }
}
