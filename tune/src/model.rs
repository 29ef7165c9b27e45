//! The machine model that starts a search (Yotov et al., "Think globally,
//! search locally", after Yotov et al.'s model of ATLAS): from the measured
//! machine and what the compiler builds the kernel for, the register tile
//! (rows x cols), the cache tile for each cache level, and the k-loop
//! unrolling, for parameters by role. Every input is a [`Fact`] that says
//! where it came from (the probe, sysfs, the compiler, or a documented
//! fallback), and every choice says which rule made it.

use crate::roles::{Role, Roles};
use crate::space::{Param, Point, Space};
use config::{Config, Kind, Value};
use serde::Serialize;
use spec_lang::ast::{InitValue, Spec, TuneLayout};

/// A value the model uses and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact<T> {
    pub value: T,
    pub source: String,
}

impl<T> Fact<T> {
    pub fn new(value: T, source: impl Into<String>) -> Fact<T> {
        Fact {
            value,
            source: source.into(),
        }
    }
}

/// One data cache level as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheLevel {
    pub level: u32,
    /// The probe's effective size (what a tile can really use).
    pub bytes: u64,
    pub line_bytes: u64,
    /// Associativity, when measured or documented.
    pub ways: Option<u32>,
}

/// What the compiler builds the kernel for, asked with the kernel's flags.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledIsa {
    /// Floating-point registers the ISA has (16 for x86-64 up to AVX2, 32
    /// with AVX-512 or on AArch64).
    pub fp_registers: u32,
    /// Width of one vector register, bytes (16 SSE2/NEON, 32 AVX, 64
    /// AVX-512).
    pub vector_bytes: u32,
    /// The compiler vectorises straight-line code at these flags (GCC's
    /// SLP vectoriser, on from -O2 since GCC 12; clang's at -O2 and up).
    pub vectorises: bool,
    /// The ISA has fused multiply-add (`__FMA__`, or AArch64).
    pub fma: bool,
}

impl CompiledIsa {
    /// Asks `cc` which ISA macros `cflags` define and whether its
    /// vectoriser is on; a compiler that does not answer is taken as
    /// baseline x86-64 (16 SSE registers, no FMA) without vectorising.
    pub fn ask(cc: &str, cflags: &[String]) -> CompiledIsa {
        let run = |extra: &[&str]| {
            std::process::Command::new(cc)
                .args(cflags)
                .args(extra)
                .stdin(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let macros = run(&["-dM", "-E", "-x", "c", "/dev/null"]).unwrap_or_default();
        // GCC lists its optimisers' states; clang does not know the option.
        let optimizers = run(&["-Q", "--help=optimizers"]);
        CompiledIsa::from_compiler(&macros, optimizers.as_deref(), cflags)
    }

    /// [`CompiledIsa::ask`] from the answers: the predefined macros (`cc
    /// -dM -E`) and GCC's `-Q --help=optimizers` listing (`None` for a
    /// compiler without one, judged by its `-O` level).
    pub fn from_compiler(macros: &str, optimizers: Option<&str>, cflags: &[String]) -> CompiledIsa {
        let defined = |name: &str| {
            macros
                .lines()
                .any(|l| l.starts_with(&format!("#define {name} ")))
        };
        let aarch64 = defined("__aarch64__");
        let fp_registers = if defined("__AVX512F__") || aarch64 {
            32
        } else {
            16
        };
        let vector_bytes = if defined("__AVX512F__") {
            64
        } else if defined("__AVX__") {
            32
        } else if defined("__SSE2__") || aarch64 {
            16
        } else {
            8
        };
        let vectorises = match optimizers {
            Some(list) => list
                .lines()
                .find(|l| l.trim_start().starts_with("-ftree-slp-vectorize"))
                .is_some_and(|l| l.contains("[enabled]")),
            None => {
                let level = cflags
                    .iter()
                    .rev()
                    .find_map(|f| f.strip_prefix("-O"))
                    .unwrap_or("0");
                !matches!(level, "0" | "1" | "g")
                    && !cflags
                        .iter()
                        .any(|f| f == "-fno-slp-vectorize" || f == "-fno-vectorize")
            }
        };
        CompiledIsa {
            fp_registers,
            vector_bytes,
            vectorises,
            fma: defined("__FMA__") || aarch64,
        }
    }
}

/// What the probe measured of the CPU, where it has (the model's input
/// until the probe's CPU record is read through [`CpuFacts::from_probe`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuFacts {
    /// Usable floating-point registers (X-Ray's live-value kernel).
    pub fp_registers: Option<u32>,
    /// Latency of a double multiply, cycles (Yotov's L_h).
    pub mul_latency_cycles: Option<f64>,
    /// Latency of a double add, cycles (the accumulation chain).
    pub add_latency_cycles: Option<f64>,
    /// Latency of a double fused multiply-add, cycles.
    pub fma_latency_cycles: Option<f64>,
    /// Multiplies started per cycle (Yotov's |ALU_FP|).
    pub fp_pipes: Option<u32>,
    /// The CPU's FMA keeps the exact product (measured).
    pub fma_fused: Option<bool>,
    pub l1d_ways: Option<u32>,
    pub l2_ways: Option<u32>,
    /// Where these came from ("tdg probe", ...).
    pub source: String,
}

impl CpuFacts {
    /// The probe's CPU record, read at the width the kernel is compiled
    /// for: its register count, the latencies of multiply, add and FMA at
    /// that width (scalar when the compiler does not vectorise, or when the
    /// probe did not time that width), the multiplies started per cycle
    /// (the inverse of the reciprocal throughput), whether the FMA is fused,
    /// and the measured ways.
    pub fn from_probe(cpu: &probe::CpuParams, isa: &CompiledIsa) -> CpuFacts {
        use probe::cpu::{FpOp, Width};
        let compiled = match (isa.vectorises, isa.vector_bytes) {
            (true, 64) => Width::Avx512,
            (true, 32) => Width::Avx2,
            (true, 16) => Width::Sse2,
            _ => Width::Scalar,
        };
        let width = if cpu.fp_timing(FpOp::Mul, compiled).is_some() {
            compiled
        } else {
            Width::Scalar
        };
        let latency = |op| cpu.fp_timing(op, width).map(|t| t.latency_cycles);
        let multiply = if isa.fma { FpOp::Fma } else { FpOp::Mul };
        let fp_pipes = cpu
            .fp_timing(multiply, width)
            .filter(|t| t.recip_throughput_cycles > 0.0)
            .map(|t| ((1.0 / t.recip_throughput_cycles).round() as u32).max(1));
        CpuFacts {
            fp_registers: cpu.fp_registers_for(width),
            mul_latency_cycles: latency(FpOp::Mul),
            add_latency_cycles: latency(FpOp::Add),
            fma_latency_cycles: latency(FpOp::Fma),
            fp_pipes,
            fma_fused: cpu.fma.fused,
            l1d_ways: cpu.l1d_ways.as_ref().and_then(|a| a.ways()),
            l2_ways: cpu.l2_ways.as_ref().and_then(|a| a.ways()),
            source: format!("tdg probe ({} width)", width.name()),
        }
    }
}

/// Latency assumed when the probe has not measured one: 4 cycles, the
/// multiply and FMA latency of AMD Zen 2-4 and Intel Skylake-SP to
/// Sapphire Rapids.
const FALLBACK_LATENCY_CYCLES: f64 = 4.0;
/// Add latency assumed when not measured (Zen 2-4: 3; Skylake-SP on: 4).
const FALLBACK_ADD_LATENCY_CYCLES: f64 = 3.0;
/// Floating-point pipes assumed when not measured: both vendors' server
/// cores of the last decade issue two multiplies or FMAs per cycle.
const FALLBACK_PIPES: u32 = 2;
/// L1 instruction cache assumed when sysfs does not say.
const FALLBACK_ICACHE_BYTES: u64 = 32 << 10;
/// Bytes of machine code per floating-point operation or load in an
/// unrolled kernel body (x86-64 vector instructions are 4-6 bytes).
const CODE_BYTES_PER_OP: u64 = 5;
/// At most this many logical registers is "few" (Yotov et al. 4.1.1: the
/// Opteron's 8): the refined register tile applies.
const FEW_REGISTERS: u32 = 8;

/// What the model needs to know about the machine and the kernel's build.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineModel {
    /// Data caches, innermost first.
    pub caches: Vec<CacheLevel>,
    pub fp_registers: Fact<u32>,
    /// Elements per vector register as compiled (1 when the compiler does
    /// not vectorise).
    pub lanes: Fact<u32>,
    /// The kernel's multiply-adds are fused instructions.
    pub fma: Fact<bool>,
    /// Latency of the multiply (or FMA, when fused) feeding the
    /// accumulation: Yotov's L_h.
    pub multiply_latency: Fact<f64>,
    /// Latency of one step of an accumulation chain: the FMA's when fused,
    /// else the add's.
    pub accumulate_latency: Fact<f64>,
    pub fp_pipes: Fact<u32>,
    /// The core reorders and renames registers (every x86-64 and AArch64
    /// server core): the schedule's temporaries need no logical registers.
    pub out_of_order: bool,
    pub icache_bytes: Fact<u64>,
    pub elem_bytes: u64,
}

impl MachineModel {
    /// The model from the probe's caches (effective sizes, line, ways),
    /// the compiler's answer for the kernel's flags, the CPU's measured
    /// facts (`cpu`, where the probe has them) and the kernel's element
    /// size.
    pub fn new(
        probe: &probe::ProbeResult,
        isa: &CompiledIsa,
        cpu: &CpuFacts,
        elem_bytes: u64,
    ) -> MachineModel {
        let src = if cpu.source.is_empty() {
            "tdg probe".to_string()
        } else {
            cpu.source.clone()
        };
        let fma = fma_fact(isa, cpu);
        let (multiply_latency, accumulate_latency) = latencies(cpu, fma.value, &src);
        MachineModel {
            caches: data_caches(probe, cpu),
            fp_registers: match cpu.fp_registers {
                // The probe counts the baseline ISA's registers; a kernel
                // compiled for a wider register file has the ISA's count.
                Some(n) if n >= isa.fp_registers.min(16) && isa.fp_registers <= 16 => {
                    Fact::new(n.min(isa.fp_registers), src.clone())
                }
                _ => Fact::new(isa.fp_registers, "the compiled ISA (cc -dM -E)"),
            },
            lanes: lanes(isa, elem_bytes),
            fma,
            multiply_latency,
            accumulate_latency,
            fp_pipes: match cpu.fp_pipes {
                Some(p) => Fact::new(p.max(1), src.clone()),
                None => Fact::new(FALLBACK_PIPES, "not measured: 2 pipes assumed"),
            },
            out_of_order: true,
            icache_bytes: icache(probe),
            elem_bytes: elem_bytes.max(1),
        }
    }

    /// Yotov's L_s (equation 9): how far the schedule skews each add after
    /// its multiply, ceil(L_h * |ALU_FP| / 2) + 1.
    pub fn skew(&self) -> u32 {
        (self.multiply_latency.value * f64::from(self.fp_pipes.value) / 2.0).ceil() as u32 + 1
    }
}

/// The probe's data caches, innermost first, with their ways: the CPU's
/// measured L1d/L2 ways, else the documented ones.
fn data_caches(probe: &probe::ProbeResult, cpu: &CpuFacts) -> Vec<CacheLevel> {
    let documented = |level: u32| {
        probe
            .documented_caches
            .iter()
            .find(|d| d.level == level && d.kind != "Instruction")
    };
    probe
        .caches
        .iter()
        .map(|c| CacheLevel {
            level: c.level,
            bytes: c.effective_bytes,
            line_bytes: probe.line.bytes.max(1),
            ways: match c.level {
                1 => cpu.l1d_ways,
                2 => cpu.l2_ways,
                _ => None,
            }
            .or_else(|| documented(c.level).and_then(|d| d.ways).map(|w| w as u32)),
        })
        .collect()
}

/// The L1 instruction cache sysfs documents, else an assumed 32 KiB.
fn icache(probe: &probe::ProbeResult) -> Fact<u64> {
    probe
        .documented_caches
        .iter()
        .find(|d| d.level == 1 && d.kind == "Instruction")
        .map(|d| Fact::new(d.size_bytes, "sysfs"))
        .unwrap_or(Fact::new(
            FALLBACK_ICACHE_BYTES,
            "not documented: 32 KiB assumed",
        ))
}

/// Whether the kernel's multiply-adds are fused: the compiled code fuses
/// only when the ISA has FMA and the CPU's instruction really is fused.
fn fma_fact(isa: &CompiledIsa, cpu: &CpuFacts) -> Fact<bool> {
    Fact::new(
        isa.fma && cpu.fma_fused != Some(false),
        match (isa.fma, cpu.fma_fused) {
            (false, _) => "the kernel's flags do not enable FMA (e.g. -mfma, -march=native)",
            (true, Some(false)) => "the probe found the CPU's FMA not fused",
            (true, _) => "the kernel's flags enable FMA",
        },
    )
}

/// The multiply's latency (the FMA's when fused) and one accumulation
/// step's (the FMA's when fused, else the add's): measured (`src` says
/// where), else an assumed number of cycles.
fn latencies(cpu: &CpuFacts, fma: bool, src: &str) -> (Fact<f64>, Fact<f64>) {
    let measured = |v: Option<f64>, fallback: f64, what: &str| match v {
        Some(v) => Fact::new(v, src.to_string()),
        None => Fact::new(
            fallback,
            format!("not measured: {fallback} cycles assumed ({what})"),
        ),
    };
    let mul = measured(
        if fma {
            cpu.fma_latency_cycles
        } else {
            cpu.mul_latency_cycles
        },
        FALLBACK_LATENCY_CYCLES,
        if fma { "FMA" } else { "multiply" },
    );
    let acc = if fma {
        mul.clone()
    } else {
        measured(cpu.add_latency_cycles, FALLBACK_ADD_LATENCY_CYCLES, "add")
    };
    (mul, acc)
}

/// Elements per vector register as compiled: 1 when the compiler does not
/// vectorise at the kernel's flags.
fn lanes(isa: &CompiledIsa, elem_bytes: u64) -> Fact<u32> {
    if isa.vectorises {
        Fact::new(
            (u64::from(isa.vector_bytes) / elem_bytes.max(1)).max(1) as u32,
            format!(
                "{}-byte vectors of {elem_bytes}-byte elements, vectorised at these flags",
                isa.vector_bytes
            ),
        )
    } else {
        Fact::new(1, "the compiler does not vectorise at these flags")
    }
}

/// A register tile and the rule that chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegisterTile {
    pub rows: i64,
    pub cols: i64,
    pub rule: String,
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// The register tile (Yotov et al. 3.1.2 and 4.1.1), with `lanes`
/// elements per register along its unit-stride extent (`rows` for a
/// column-major result):
///
/// - registers: accumulators ceil(rows/lanes)*cols, plus a column of A
///   ceil(rows/lanes) and a row of B cols, plus L_s temporaries when an
///   in-order core without FMA needs the skewed schedule (inequality 1);
///   an out-of-order core renames them;
/// - with few registers (at most 8) the refined model: cols = 1,
///   rows = (NR - 2) registers' worth;
/// - else the tile within the registers that does the most multiply-adds
///   per value loaded, preferring tiles with enough independent
///   accumulators (latency x pipes) to keep the pipes busy, then the
///   larger, then the squarer tile.
pub fn register_tile(m: &MachineModel, layout: TuneLayout) -> RegisterTile {
    let nr = i64::from(m.fp_registers.value);
    let lanes = i64::from(m.lanes.value.max(1));
    let charged = if m.out_of_order || m.fma.value {
        0
    } else {
        i64::from(m.skew())
    };
    let (vec, other) = if m.fp_registers.value <= FEW_REGISTERS {
        (
            (nr - 2).max(1) * lanes,
            1,
            // rule below
        )
    } else {
        let busy = (m.accumulate_latency.value * f64::from(m.fp_pipes.value)).ceil() as i64;
        // (accumulators cover the latency, multiply-adds per register
        // loaded in thousandths, rows, cols) of every tile that fits.
        let mut fitting: Vec<(bool, i64, i64, i64)> = Vec::new();
        for v in 1..=nr * lanes {
            for o in 1..=nr {
                let regs = ceil_div(v, lanes) * o + ceil_div(v, lanes) + o + charged;
                if regs <= nr {
                    let reuse = v * o * 1000 / (ceil_div(v, lanes) + o);
                    fitting.push((ceil_div(v, lanes) * o >= busy, reuse, v, o));
                }
            }
        }
        let covered = fitting.iter().any(|t| t.0);
        fitting.retain(|t| t.0 == covered);
        let top = fitting.iter().map(|t| t.1).max().unwrap_or(0);
        // Extents that divide the cache tile leave no clean-up code for the
        // edges (Yotov et al. 3.2: NB divisible by MU and NU performs
        // better), and power-of-two extents divide the power-of-two tiles
        // and problems kernels meet: within 25% of the best reuse, they win.
        fitting
            .into_iter()
            .filter(|t| t.1 * 5 >= top * 4)
            .max_by_key(|&(_, reuse, v, o)| {
                let pow2 = (v as u64).is_power_of_two() && (o as u64).is_power_of_two();
                (pow2, reuse, v * o, -(v - o).abs())
            })
            .map_or((1, 1), |t| (t.2, t.3))
    };
    let rule = if m.fp_registers.value <= FEW_REGISTERS {
        format!(
            "{} registers are few: refined model, a single column of {} registers' worth (Yotov et al. 4.1.1)",
            nr,
            nr - 2
        )
    } else {
        format!(
            "most multiply-adds per loaded value in {nr} registers{} (Yotov et al. ineq. 1), {lanes} per register, >= {} accumulators, power-of-two extents within 25%",
            if charged > 0 {
                format!(" less L_s={charged}")
            } else if m.fma.value {
                String::new()
            } else {
                ", L_s renamed out of order (4.1.1)".to_string()
            },
            (m.accumulate_latency.value * f64::from(m.fp_pipes.value)).ceil(),
        )
    };
    // The vectorised extent is the unit-stride one.
    let (rows, cols) = match layout {
        TuneLayout::ColMajor => (vec, other),
        TuneLayout::RowMajor => (other, vec),
    };
    RegisterTile { rows, cols, rule }
}

/// Whether a rows x cols register tile fits the registers by inequality 1
/// as [`register_tile`] counts them (what ATLAS's line search tries).
pub fn fits_registers(m: &MachineModel, layout: TuneLayout, rows: i64, cols: i64) -> bool {
    let lanes = i64::from(m.lanes.value.max(1));
    let (vec, other) = match layout {
        TuneLayout::ColMajor => (rows, cols),
        TuneLayout::RowMajor => (cols, rows),
    };
    let charged = if m.out_of_order || m.fma.value {
        0
    } else {
        i64::from(m.skew())
    };
    let v = ceil_div(vec.max(1), lanes);
    v * other + v + other + charged <= i64::from(m.fp_registers.value)
        || (m.fp_registers.value <= FEW_REGISTERS && other == 1)
}

/// The largest cache tile NB for `cache` with the register tile `tile`
/// (Yotov et al. 3.1.1, in lines of B elements, C the cache in lines):
/// inequality 6, ceil(NB^2/B) + 3 ceil(NB*NU/B) + ceil(MU/B)*NU <= C/B,
/// which keeps A's tile while B's and C's panels stream through an LRU
/// cache. A cache of fewer than 3 ways cannot keep the tile against the
/// streams' conflicts, so there all three tiles must fit (inequality 2).
pub fn cache_tile(cache: &CacheLevel, tile: &RegisterTile, elem_bytes: u64) -> (i64, String) {
    let per_line = (cache.line_bytes / elem_bytes.max(1)).max(1) as i64;
    let lines = (cache.bytes / cache.line_bytes.max(1)) as i64;
    let elems = (cache.bytes / elem_bytes.max(1)) as i64;
    let few_ways = cache.ways.is_some_and(|w| w < 3);
    let fits = |nb: i64| {
        if few_ways {
            3 * nb * nb <= elems
        } else {
            ceil_div(nb * nb, per_line)
                + 3 * ceil_div(nb * tile.cols, per_line)
                + ceil_div(tile.rows, per_line) * tile.cols
                <= lines
        }
    };
    let mut nb = 1;
    while fits(nb + 1) && nb < 1 << 20 {
        nb += 1;
    }
    let rule = if few_ways {
        format!(
            "3*NB^2 elements fit L{} ({}; {} ways: all three tiles, Yotov et al. ineq. 2)",
            cache.level,
            stats::bytes(cache.bytes),
            cache.ways.unwrap_or(0)
        )
    } else {
        format!(
            "L{} {} in {}-byte lines under LRU (Yotov et al. ineq. 6)",
            cache.level,
            stats::bytes(cache.bytes),
            cache.line_bytes
        )
    };
    (nb, rule)
}

/// The k-loop unrolling (Yotov et al. 3.1.4): all of the tile (KU = NB)
/// unless the unrolled body would not fit the L1 instruction cache.
pub fn k_unroll(m: &MachineModel, tile: &RegisterTile, nb: i64) -> (i64, String) {
    let lanes = i64::from(m.lanes.value.max(1));
    let (vec, other) = (tile.rows.max(tile.cols), tile.rows.min(tile.cols));
    let ops_per_k = ceil_div(vec, lanes) * other * if m.fma.value { 1 } else { 2 }
        + ceil_div(vec, lanes)
        + other;
    let fit = (m.icache_bytes.value / (CODE_BYTES_PER_OP * ops_per_k.max(1) as u64)) as i64;
    if nb <= fit {
        (
            nb,
            format!(
                "KU=NB={nb}: the unrolled tile fits the L1 instruction cache ({}, {})",
                stats::bytes(m.icache_bytes.value),
                m.icache_bytes.source
            ),
        )
    } else {
        (
            fit.max(1),
            format!(
                "{} unrolled steps of {ops_per_k} instructions fill the L1 instruction cache ({})",
                fit.max(1),
                stats::bytes(m.icache_bytes.value)
            ),
        )
    }
}

/// `point` with its cache tile moved to the space's value nearest `nb`
/// that the register tile's extents (as snapped) both divide (Yotov et al.
/// 4.2.1: no clean-up code at the tile's edges), when one lies within a
/// factor of two of `nb`, the constraints allow it and `--start` did not
/// fix the tile.
fn tile_dividing(
    space: &Space,
    roles: &Roles,
    point: &Point,
    dim: usize,
    nb: i64,
    fixed: &Config,
) -> Point {
    let name = &space.params[dim].name;
    if fixed.get(name).is_some() {
        return point.clone();
    }
    let extent = |r: Role| roles.dim(r).map_or(1, |d| space.value(point, d).max(1));
    let (r, c) = (extent(Role::Rows), extent(Role::Cols));
    let step = r / gcd(r, c) * c;
    let candidates = &space.params[dim];
    (0..candidates.values.len())
        .filter(|&i| {
            let v = candidates.int(i);
            v % step == 0 && v * 2 >= nb && v <= nb * 2
        })
        .map(|i| {
            let mut q = point.clone();
            q.0[dim] = i;
            q
        })
        .filter(|q| space.allows(q))
        .min_by_key(|q| (candidates.int(q.0[dim]) - nb).abs())
        .unwrap_or_else(|| point.clone())
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs().max(1)
    } else {
        gcd(b, a % b)
    }
}

/// A starting point and why the model chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Start {
    #[serde(skip)]
    pub point: Point,
    pub reason: String,
}

/// The model's starts for `space`: the first is the model's own choice
/// (the tile for L1, as Yotov et al.'s model tiles), then the tiles for L2
/// and L3 (their multi-level model, 4.1.2: which level pays is for the
/// search to measure), then, when the layout is not given and the register
/// tile is not square, the transposed tile. Parameters without a role
/// start mid-range; `fixed` (`--start`) overrides any.
pub fn starts(space: &Space, roles: &Roles, m: &MachineModel, fixed: &Config) -> Vec<Start> {
    let starter = Starter {
        space,
        roles,
        m,
        fixed,
    };
    let has_tile = roles.dim(Role::Tile).is_some();
    let levels: Vec<Option<&CacheLevel>> = if has_tile && !m.caches.is_empty() {
        m.caches.iter().take(3).map(Some).collect()
    } else {
        vec![None]
    };
    let mut out: Vec<Start> = Vec::new();
    for (tile, transposed) in &register_tiles(m, roles) {
        for level in &levels {
            let nb = level.map(|c| cache_tile(c, tile, m.elem_bytes));
            let (point, reasons) = starter.point(tile, nb.as_ref());
            if out.iter().all(|s| s.point != point) && space.allows(&point) {
                let what = match (level, transposed) {
                    (Some(c), false) => format!("tile for L{}", c.level),
                    (Some(c), true) => format!("tile for L{}, transposed register tile", c.level),
                    (None, _) => "register tile".to_string(),
                };
                out.push(Start {
                    reason: format!(
                        "{} ({what}; model: {})",
                        space.describe(&point),
                        if reasons.is_empty() {
                            "no parameter has a role: mid-range".to_string()
                        } else {
                            reasons.join(", ")
                        }
                    ),
                    point,
                });
            }
        }
    }
    out
}

/// The register tiles the starts use: the model's, and, when the layout
/// is not given and the tile is not square, its transpose (marked `true`).
fn register_tiles(m: &MachineModel, roles: &Roles) -> Vec<(RegisterTile, bool)> {
    let tile = register_tile(m, roles.layout.unwrap_or(TuneLayout::ColMajor));
    let mut tiles = vec![(tile.clone(), false)];
    if roles.layout.is_none() && tile.rows != tile.cols {
        tiles.push((
            RegisterTile {
                rows: tile.cols,
                cols: tile.rows,
                rule: format!("{} (transposed: the layout is not given)", tile.rule),
            },
            true,
        ));
    }
    tiles
}

/// What a start is computed from: the space, its roles, the machine model
/// and the values `--start` fixed.
struct Starter<'a> {
    space: &'a Space,
    roles: &'a Roles,
    m: &'a MachineModel,
    fixed: &'a Config,
}

impl Starter<'_> {
    /// The start for one register tile and cache tile (`nb`, with its
    /// rule; `None` without a cache level), with the reason of each value
    /// the model chose.
    fn point(&self, tile: &RegisterTile, nb: Option<&(i64, String)>) -> (Point, Vec<String>) {
        let mut reasons = Vec::new();
        let wanted: Vec<Value> = self
            .space
            .params
            .iter()
            .enumerate()
            .map(|(dim, p)| self.value(dim, p, tile, nb, &mut reasons))
            .collect();
        let mut point = self.space.nearest(&wanted);
        if let (Some(dim), Some((nb, _))) = (self.roles.dim(Role::Tile), nb) {
            point = tile_dividing(self.space, self.roles, &point, dim, *nb, self.fixed);
        }
        (point, reasons)
    }

    /// The value the parameter at `dim` starts at: the given one, the
    /// team's size for threads, the model's for a role, else mid-range;
    /// why is pushed onto `reasons`.
    fn value(
        &self,
        dim: usize,
        p: &Param,
        tile: &RegisterTile,
        nb: Option<&(i64, String)>,
        reasons: &mut Vec<String>,
    ) -> Value {
        if let Some(v) = self.fixed.value(&p.name) {
            reasons.push(format!("{}={v} given", p.name));
            return v.clone();
        }
        if p.kind == Kind::Threads {
            // One thread per CPU this process may use: more would share
            // CPUs, which the driver refuses.
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as i64);
            let v = p
                .int_values()
                .filter(|v| *v <= cpus)
                .max()
                .unwrap_or(p.int(0));
            reasons.push(format!("threads={v}: the CPUs tdg may use"));
            return Value::Int(v);
        }
        let mid = p.values[p.values.len() / 2].clone();
        let mid_int = p.int(p.values.len() / 2);
        let int = match self.roles.role_of(dim) {
            Some(Role::Tile) => match nb {
                Some((v, rule)) => {
                    reasons.push(format!("{}={v}: {rule}", p.name));
                    *v
                }
                None => return mid,
            },
            Some(Role::Rows) => {
                reasons.push(format!("{}={}", p.name, tile.rows));
                tile.rows
            }
            Some(Role::Cols) => {
                reasons.push(format!("{}={}: {}", p.name, tile.cols, tile.rule));
                tile.cols
            }
            Some(Role::KUnroll) => {
                let (ku, rule) = k_unroll(self.m, tile, nb.map_or(mid_int, |n| n.0));
                reasons.push(format!("{}={ku}: {rule}", p.name));
                ku
            }
            None => return mid,
        };
        Value::Int(int)
    }
}

impl MachineModel {
    /// The model for kernels of `spec` built by the compiler `cc` with
    /// `cflags` on the machine `probe` measured: the compiler is asked what
    /// it builds for, and the CPU's facts are read from the probe.
    pub fn for_compiler(
        probe: &probe::ProbeResult,
        cc: &str,
        cflags: &[String],
        spec: &Spec,
    ) -> MachineModel {
        let isa = CompiledIsa::ask(cc, cflags);
        let cpu = probe
            .cpu
            .as_ref()
            .map(|cpu| CpuFacts::from_probe(cpu, &isa))
            .unwrap_or_default();
        MachineModel::new(probe, &isa, &cpu, element_bytes(spec))
    }
}

/// Size of the spec's array elements (the largest, if they differ), for
/// the cache-tile model; 8 when the spec allocates no arrays of known type.
pub fn element_bytes(spec: &Spec) -> u64 {
    spec.init
        .iter()
        .filter_map(|i| match &i.value {
            InitValue::Array(a) => a.elem.base.size_bytes(),
            InitValue::Scalar(_) => None,
        })
        .max()
        .unwrap_or(8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::parse_param;

    /// A probe record this machine wrote (Zen 4: multiply 3 cycles, FMA 4,
    /// two pipes below AVX-512 and one at it; 16 registers, 32 with
    /// AVX-512; L1d 8 ways) read at the width each build compiles for.
    #[test]
    fn cpu_facts_come_from_the_probe_at_the_compiled_width() {
        let record: probe::ProbeResult =
            serde_json::from_str(include_str!("../../fuzz/seeds/probe_cache/real-probe.json"))
                .expect("the committed probe record reads");
        let cpu = record.cpu.as_ref().expect("the record has the CPU side");
        let avx2 = CompiledIsa {
            fp_registers: 16,
            vector_bytes: 32,
            vectorises: true,
            fma: true,
        };
        let facts = CpuFacts::from_probe(cpu, &avx2);
        assert_eq!(facts.fp_registers, Some(16));
        assert_eq!(facts.mul_latency_cycles.map(f64::round), Some(3.0));
        assert_eq!(facts.fma_latency_cycles.map(f64::round), Some(4.0));
        assert_eq!(facts.fp_pipes, Some(2));
        assert_eq!(facts.fma_fused, Some(true));
        assert_eq!(facts.l1d_ways, Some(8));
        assert!(facts.source.contains("avx2"), "{}", facts.source);
        let avx512 = CompiledIsa {
            fp_registers: 32,
            vector_bytes: 64,
            ..avx2.clone()
        };
        let wide = CpuFacts::from_probe(cpu, &avx512);
        assert_eq!(wide.fp_registers, Some(32));
        assert_eq!(wide.fp_pipes, Some(1));
        let scalar = CompiledIsa {
            vectorises: false,
            ..avx2.clone()
        };
        assert!(CpuFacts::from_probe(cpu, &scalar).source.contains("scalar"));
    }

    fn model(nr: u32, lanes: u32, fma: bool) -> MachineModel {
        MachineModel {
            caches: vec![
                CacheLevel {
                    level: 1,
                    bytes: 32 << 10,
                    line_bytes: 64,
                    ways: Some(8),
                },
                CacheLevel {
                    level: 2,
                    bytes: 1 << 20,
                    line_bytes: 64,
                    ways: Some(8),
                },
                CacheLevel {
                    level: 3,
                    bytes: 32 << 20,
                    line_bytes: 64,
                    ways: Some(16),
                },
            ],
            fp_registers: Fact::new(nr, "test"),
            lanes: Fact::new(lanes, "test"),
            fma: Fact::new(fma, "test"),
            multiply_latency: Fact::new(4.0, "test"),
            accumulate_latency: Fact::new(if fma { 4.0 } else { 3.0 }, "test"),
            fp_pipes: Fact::new(2, "test"),
            out_of_order: true,
            icache_bytes: Fact::new(32 << 10, "test"),
            elem_bytes: 8,
        }
    }

    fn tile(m: &MachineModel) -> (i64, i64) {
        let t = register_tile(m, TuneLayout::ColMajor);
        (t.rows, t.cols)
    }

    #[test]
    fn compiler_answers_say_what_the_kernel_is_built_for() {
        let gcc_o2 = "  -ftree-slp-vectorize        \t\t[enabled]\n";
        let sse = CompiledIsa::from_compiler(
            "#define __SSE2__ 1\n#define __x86_64__ 1\n",
            Some(gcc_o2),
            &["-O2".into()],
        );
        assert_eq!(
            (sse.fp_registers, sse.vector_bytes, sse.vectorises, sse.fma),
            (16, 16, true, false)
        );
        let avx512 = CompiledIsa::from_compiler(
            "#define __AVX__ 1\n#define __AVX512F__ 1\n#define __FMA__ 1\n",
            Some("  -ftree-slp-vectorize [disabled]\n"),
            &["-O1".into()],
        );
        assert_eq!(
            (
                avx512.fp_registers,
                avx512.vector_bytes,
                avx512.vectorises,
                avx512.fma
            ),
            (32, 64, false, true)
        );
        // clang has no optimiser listing: its -O level decides.
        assert!(CompiledIsa::from_compiler("", None, &["-O3".into()]).vectorises);
        assert!(!CompiledIsa::from_compiler("", None, &["-O1".into()]).vectorises);
        assert!(!CompiledIsa::from_compiler("", None, &[]).vectorises);
        // The real compiler at plain -O2 on x86-64: SSE2's 16 registers.
        if cfg!(target_arch = "x86_64") {
            let here = CompiledIsa::ask("cc", &["-O2".into()]);
            assert_eq!((here.fp_registers, here.vector_bytes), (16, 16));
            let wide = CompiledIsa::ask("cc", &["-O2".into(), "-mavx512f".into(), "-mfma".into()]);
            assert_eq!(
                (wide.fp_registers, wide.vector_bytes, wide.fma),
                (32, 64, true)
            );
        }
    }

    #[test]
    fn register_tiles_follow_the_inequality_and_the_vector_width() {
        // Scalar, 16 registers: inequality 1 allows 3x3 (9 + 3 + 3 = 15,
        // 1.5 multiply-adds per load); 4x2 (8 + 4 + 2, 1.33) is within 25%
        // and has power-of-two extents.
        assert_eq!(tile(&model(16, 1, false)), (4, 2));
        // Two doubles a register: 6x3 (3*3 + 3 + 3 = 15 registers, 3.0 per
        // load) against 4x4 (2*4 + 2 + 4 = 14, 2.67): 4x4 divides the tiles.
        assert_eq!(tile(&model(16, 2, false)), (4, 4));
        // AVX2 with FMA: 8x4 (2*4 + 2 + 4), 8 accumulators for 4 cycles x 2
        // pipes; AVX-512 with 32 registers: wide tiles.
        assert_eq!(tile(&model(16, 4, true)), (8, 4));
        let (r, c) = tile(&model(32, 8, true));
        assert!(
            r % 8 == 0 && (r / 8) * c + r / 8 + c <= 32 && (r / 8) * c >= 8,
            "{r}x{c}"
        );
        // Every tile the model picks fits the registers.
        for nr in [9u32, 12, 16, 24, 32] {
            for lanes in [1u32, 2, 4, 8] {
                let (r, c) = tile(&model(nr, lanes, false));
                let v = (r + i64::from(lanes) - 1) / i64::from(lanes);
                assert!(
                    v * c + v + c <= i64::from(nr),
                    "{nr} regs, {lanes} lanes: {r}x{c}"
                );
            }
        }
    }

    #[test]
    fn few_registers_take_the_refined_single_column_tile() {
        // The Opteron's 8 registers: 6x1 (Yotov et al. 4.1.1).
        assert_eq!(tile(&model(8, 1, false)), (6, 1));
        assert!(register_tile(&model(8, 1, false), TuneLayout::ColMajor)
            .rule
            .contains("4.1.1"));
    }

    #[test]
    fn an_in_order_core_without_fma_spends_registers_on_the_skew() {
        let mut m = model(16, 1, false);
        m.out_of_order = false;
        // L_s = ceil(4*2/2)+1 = 5: 16 - 5 = 11 registers, 2x2 (4+2+2=8) or
        // 3x2 (6+3+2=11).
        assert_eq!(m.skew(), 5);
        let (r, c) = tile(&m);
        assert!(r * c + r + c + 5 <= 16, "{r}x{c}");
        assert!(register_tile(&m, TuneLayout::ColMajor)
            .rule
            .contains("less L_s=5"));
        // With FMA there is no separate add to skew (4.2.2): all 16 again.
        m.fma.value = true;
        let (r2, c2) = tile(&m);
        assert!(r2 * c2 > r * c && r2 * c2 + r2 + c2 <= 16, "{r2}x{c2}");
    }

    #[test]
    fn a_row_major_result_vectorises_the_columns() {
        let m = model(16, 2, false);
        let mut m = m;
        m.lanes.value = 4;
        m.fma.value = true;
        let t = register_tile(&m, TuneLayout::RowMajor);
        assert_eq!((t.rows, t.cols), (4, 8));
    }

    #[test]
    fn cache_tiles_follow_inequality_six_and_two() {
        let m = model(16, 2, false);
        let t = register_tile(&m, TuneLayout::ColMajor);
        let (nb, rule) = cache_tile(&m.caches[0], &t, 8);
        // 512 lines of 8 doubles, a 4x4 register tile: NB=58 uses
        // 421 + 3*29 + 1*4 = 512 lines.
        assert_eq!(nb, 58, "{rule}");
        let lines = |nb: i64| (nb * nb + 7) / 8 + 3 * ((nb * 4 + 7) / 8) + 4;
        assert!(lines(nb) <= 512 && lines(nb + 1) > 512);
        // Larger levels give larger tiles.
        let (nb2, _) = cache_tile(&m.caches[1], &t, 8);
        let (nb3, _) = cache_tile(&m.caches[2], &t, 8);
        assert!(nb < nb2 && nb2 < nb3, "{nb} {nb2} {nb3}");
        // A 2-way cache keeps all three tiles: 3*NB^2 <= 4096.
        let two_way = CacheLevel {
            ways: Some(2),
            ..m.caches[0].clone()
        };
        assert_eq!(cache_tile(&two_way, &t, 8).0, 36);
    }

    #[test]
    fn k_unroll_is_the_tile_unless_the_code_overflows_the_icache() {
        let m = model(16, 2, false);
        let t = register_tile(&m, TuneLayout::ColMajor);
        assert_eq!(k_unroll(&m, &t, 64).0, 64);
        let (ku, rule) = k_unroll(&m, &t, 4096);
        assert!(ku < 4096 && ku > 16, "{ku}: {rule}");
    }

    #[test]
    fn starts_by_role_one_per_cache_level_snapped_into_the_space() {
        let space = Space::new(vec![
            parse_param("TILE=16:256:16").unwrap(),
            parse_param("R=1:8").unwrap(),
            parse_param("C=1:8").unwrap(),
            parse_param("X=1,2,4").unwrap(),
        ])
        .unwrap();
        let roles = Roles::resolve(
            &space,
            &[
                crate::roles::parse_role("TILE=tile").unwrap(),
                crate::roles::parse_role("R=rows").unwrap(),
                crate::roles::parse_role("C=cols").unwrap(),
            ],
            Some(TuneLayout::ColMajor),
            None,
        )
        .unwrap();
        let m = model(16, 2, false);
        let s = starts(&space, &roles, &m, &Config::new());
        // L1: NB 58 -> 64; L2 and L3 both snap to the range's end.
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(space.describe(&s[0].point), "TILE=64 R=4 C=4 X=2");
        assert_eq!(space.describe(&s[1].point), "TILE=256 R=4 C=4 X=2");
        assert!(s[0].reason.contains("tile for L1"), "{}", s[0].reason);
        // Without a layout the transposed register tile is a start too.
        let unlaid = Roles {
            layout: None,
            ..roles.clone()
        };
        let mut wide = m.clone();
        wide.lanes.value = 4;
        wide.fma.value = true;
        let s = starts(&space, &unlaid, &wide, &Config::new());
        assert!(
            s.iter()
                .any(|s| space.describe(&s.point).contains(" R=4 C=8 ")),
            "{s:?}"
        );
        // --start overrides per parameter; a constraint moves the start to
        // the nearest configuration it allows.
        let given = Config::from_pairs([("C", 8)]).unwrap();
        let fixed = starts(&space, &roles, &m, &given);
        assert!(fixed.iter().all(|s| space.value(&s.point, 2) == 8));
        let constrained = space
            .clone()
            .constrained(
                vec![crate::space::parse_constraint("TILE % R == 0").unwrap()],
                Default::default(),
            )
            .unwrap();
        let s = starts(&constrained, &roles, &m, &Config::new());
        let v = |d| constrained.value(&s[0].point, d);
        assert_eq!(v(0) % v(1), 0, "{}", s[0].reason);
    }
}
