//! Generates the C source of the CPU probe (X-Ray's generated
//! micro-benchmarks): a prologue with one function per kernel, written out
//! so each statement is one instruction with nothing in between, followed by
//! the fixed body in `cpubench.c`.
//!
//! - the integer chain: dependent `add`s in inline assembly (C additions of
//!   a loop-invariant value would be folded into one multiply);
//! - floating-point chains: `op` applied to `chains` independent values,
//!   at each width through its intrinsics (a chain of one is the latency, more
//!   chains fill the pipelines: the initiation interval), and the same
//!   multiply-add as two instructions for the FMA comparison;
//! - live-value kernels: `values` doubles each updated from the one half a
//!   round away (BlackjackBench's variant of X-Ray's kernel), for the
//!   baseline instruction set and for AVX-512, whose compiled code shows
//!   where the compiler starts spilling them to the stack.

use crate::cpu::{FpOp, Width};
use crate::csource::{defines, prologue};
use std::fmt::Write as _;

/// Parameters compiled into the CPU probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuBenchParams {
    /// Shortest timed run; repetitions are doubled until a run lasts this.
    pub min_ns: u64,
    /// Timed runs per point (the fastest is kept).
    pub reps: u32,
    /// Timed passes of a pair or bandwidth measurement (the median counts).
    pub passes: u32,
    /// Accesses per chase pass and bytes per read pass.
    pub chase_pass: u64,
    pub read_pass: u64,
    /// Reloads per eviction test (the fastest decides) and passes over the
    /// candidate set before each.
    pub evict_reps: u32,
    pub evict_passes: u32,
    /// Dependent integer adds per loop iteration of the clock chain.
    pub int_unroll: usize,
    /// Floating-point operations per loop iteration, about (rounded to a
    /// multiple of the chain count).
    pub fp_ops_per_iteration: usize,
    /// Independent chains tried for the throughput.
    pub chains: Vec<u32>,
    /// Live values tried for the register count.
    pub live_values: std::ops::RangeInclusive<u32>,
    pub huge_align: u64,
}

impl Default for CpuBenchParams {
    fn default() -> Self {
        CpuBenchParams {
            min_ns: 200_000,
            reps: 7,
            passes: 31,
            chase_pass: 8192,
            read_pass: 4 << 20,
            evict_reps: 5,
            evict_passes: 3,
            int_unroll: 64,
            fp_ops_per_iteration: 24,
            // 12 chains and the two constants fit the 16 registers of the
            // baseline; latency x throughput is at most 4 x 2 = 8 on the
            // parts this runs on, so 12 saturates every pipeline.
            chains: vec![1, 2, 4, 6, 8, 12],
            // Past 32, AVX-512's count, with room for the step to show.
            live_values: 8..=40,
            huge_align: 2 << 20,
        }
    }
}

/// The instruction-set extension a function at `width` is compiled for (the
/// `target` attribute), and the intrinsics it uses.
struct Isa {
    target: Option<&'static str>,
    vector: &'static str,
    set1: &'static str,
    store: &'static str,
    lanes: usize,
    add: &'static str,
    mul: &'static str,
    fma: &'static str,
}

fn isa(width: Width, op: FpOp) -> Isa {
    let fma = op == FpOp::Fma;
    match width {
        Width::Scalar => Isa {
            target: fma.then_some("fma"),
            vector: "__m128d",
            set1: "_mm_set_sd",
            store: "_mm_storeu_pd",
            lanes: 2,
            add: "_mm_add_sd",
            mul: "_mm_mul_sd",
            fma: "_mm_fmadd_sd",
        },
        Width::Sse2 => Isa {
            target: fma.then_some("fma"),
            vector: "__m128d",
            set1: "_mm_set1_pd",
            store: "_mm_storeu_pd",
            lanes: 2,
            add: "_mm_add_pd",
            mul: "_mm_mul_pd",
            fma: "_mm_fmadd_pd",
        },
        Width::Avx2 => Isa {
            target: Some(if fma { "avx,fma" } else { "avx" }),
            vector: "__m256d",
            set1: "_mm256_set1_pd",
            store: "_mm256_storeu_pd",
            lanes: 4,
            add: "_mm256_add_pd",
            mul: "_mm256_mul_pd",
            fma: "_mm256_fmadd_pd",
        },
        Width::Avx512 => Isa {
            target: Some("avx512f"),
            vector: "__m512d",
            set1: "_mm512_set1_pd",
            store: "_mm512_storeu_pd",
            lanes: 8,
            add: "_mm512_add_pd",
            mul: "_mm512_mul_pd",
            fma: "_mm512_fmadd_pd",
        },
    }
}

/// Name of the generated function timing `op` at `width` over `chains`.
pub fn fp_kernel_name(op: &str, width: Width, chains: u32) -> String {
    format!("tdg_fp_{op}_{}_{chains}", width.name())
}

/// Name of the live-value kernel keeping `values` doubles live, compiled
/// for `isa` (`Scalar`: the baseline; `Avx512`).
pub fn live_kernel_name(isa: Width, values: u32) -> String {
    format!("tdg_live_{}_{values}", isa.name())
}

/// The instruction sets the live-value kernels are compiled for.
pub const LIVE_ISAS: [Width; 2] = [Width::Scalar, Width::Avx512];

fn attribute(target: Option<&str>) -> String {
    target.map_or(String::new(), |t| {
        format!("__attribute__((target(\"{t}\"))) ")
    })
}

/// One floating-point kernel: `op` on `chains` independent values. `muladd`
/// (scalar only) is the multiply and the add as two instructions.
fn fp_kernel(
    s: &mut String,
    op: &str,
    width: Width,
    chains: u32,
    ops_per_iteration: usize,
) -> usize {
    let fp_op = match op {
        "add" => FpOp::Add,
        "mul" => FpOp::Mul,
        _ => FpOp::Fma,
    };
    let i = isa(width, fp_op);
    let target = if op == "muladd" { None } else { i.target };
    let name = fp_kernel_name(op, width, chains);
    let rounds = (ops_per_iteration / chains as usize).max(1);
    let _ = writeln!(s, "{}static double {name}(long n)\n{{", attribute(target));
    let _ = writeln!(
        s,
        "    const {v} one = {set1}(fp_seed[0]), zero = {set1}(fp_seed[1]);\n    (void)one;\n    (void)zero;",
        v = i.vector,
        set1 = i.set1
    );
    // Each chain starts from its own volatile read: chains the compiler
    // could prove equal it would merge into one.
    let init: Vec<String> = (0..chains)
        .map(|c| format!("x{c} = {}(fp_seed[0])", i.set1))
        .collect();
    let _ = writeln!(s, "    {} {};", i.vector, init.join(", "));
    let _ = writeln!(s, "    double out[{}];\n    long r;", i.lanes);
    s.push_str("    for (r = 0; r < n; r++) {\n");
    for _ in 0..rounds {
        for c in 0..chains {
            let stmt = match op {
                "add" => format!("x{c} = {}(x{c}, zero);", i.add),
                "mul" => format!("x{c} = {}(x{c}, one);", i.mul),
                "fma" => format!("x{c} = {}(x{c}, one, zero);", i.fma),
                _ => format!("x{c} = {}({}(x{c}, one), zero);", i.add, i.mul),
            };
            let _ = writeln!(s, "        {stmt}");
        }
    }
    s.push_str("    }\n");
    for c in 1..chains {
        let _ = writeln!(s, "    x0 = {}(x0, x{c});", i.add);
    }
    let _ = writeln!(s, "    {}(out, x0);\n    return out[0];\n}}", i.store);
    rounds * chains as usize
}

/// One live-value kernel: `values` doubles, each updated from the value half
/// a round away, all live across the loop.
fn live_kernel(s: &mut String, isa: Width, values: u32) {
    let target = (isa == Width::Avx512).then_some("avx512f");
    let name = live_kernel_name(isa, values);
    let _ = writeln!(s, "{}static double {name}(long n)\n{{", attribute(target));
    let init: Vec<String> = (0..values).map(|v| format!("p{v} = fp_seed[1]")).collect();
    let _ = writeln!(s, "    double {};\n    long r;", init.join(", "));
    s.push_str("    for (r = 0; r < n; r++) {\n");
    for v in 0..values {
        let _ = writeln!(s, "        p{v} = p{v} + p{};", (v + values / 2) % values);
    }
    s.push_str("    }\n");
    let sum: Vec<String> = (0..values).map(|v| format!("p{v}")).collect();
    let _ = writeln!(s, "    return {};\n}}", sum.join(" + "));
}

/// The complete C program.
pub fn cpubench_source(p: &CpuBenchParams) -> String {
    let mut s = String::new();
    prologue(
        &mut s,
        &[
            "pthread.h",
            "sched.h",
            "sys/mman.h",
            "immintrin.h",
            "x86intrin.h",
        ],
    );
    defines(
        &mut s,
        &[
            ("TDG_MIN_NS", format!("{}.0", p.min_ns)),
            ("TDG_REPS", p.reps.to_string()),
            ("TDG_PASSES", p.passes.to_string()),
            ("TDG_EVICT_REPS", p.evict_reps.to_string()),
            ("TDG_EVICT_PASSES", p.evict_passes.to_string()),
            ("TDG_CHASE_PASS", p.chase_pass.to_string()),
            ("TDG_READ_PASS", format!("((size_t){})", p.read_pass)),
            ("TDG_HUGE_ALIGN", format!("((size_t){})", p.huge_align)),
            ("TDG_INT_UNROLL", p.int_unroll.to_string()),
        ],
    );
    int_chains(&mut s, p.int_unroll);
    // 1.0 and 0.0, read at run time so no operation can be folded.
    s.push_str("static volatile double fp_seed[2] = {1.0, 0.0};\n");
    s.push_str(FUSED_CHECK);
    fp_kernels(&mut s, p);
    live_kernels(&mut s, p);
    s.push_str(include_str!("../c/bench_common.c"));
    s.push_str(include_str!("../c/cpubench.c"));
    s
}

/// The integer chains as macros: `TDG_INT_CHAIN` dependent adds, and
/// `TDG_INT_PARALLEL` six independent ones per step.
fn int_chains(s: &mut String, unroll: usize) {
    // One asm statement, so nothing the compiler adds lands inside the chain.
    s.push_str("#define TDG_INT_CHAIN(x, y) __asm__ volatile(");
    for _ in 0..unroll {
        s.push_str("\"add %1, %0\\n\\t\" ");
    }
    s.push_str(": \"+r\"(x) : \"r\"(y))\n");
    s.push_str("#define TDG_INT_PARALLEL(a, b, c, d, e, f, y) __asm__ volatile(");
    for _ in 0..8 {
        for r in 0..6 {
            let _ = write!(s, "\"add %6, %{r}\\n\\t\" ");
        }
    }
    s.push_str(": \"+r\"(a), \"+r\"(b), \"+r\"(c), \"+r\"(d), \"+r\"(e), \"+r\"(f) : \"r\"(y))\n");
}

/// Every floating-point kernel (each op, width and chain count, and the
/// separate multiply-add), then the table `cpubench.c` walks.
fn fp_kernels(s: &mut String, p: &CpuBenchParams) {
    let mut table = Vec::new();
    for width in Width::ALL {
        for op in FpOp::ALL {
            for &chains in &p.chains {
                let ops = fp_kernel(s, op.name(), width, chains, p.fp_ops_per_iteration);
                table.push((op.name(), width, chains, ops));
            }
        }
    }
    let ops = fp_kernel(s, "muladd", Width::Scalar, 1, p.fp_ops_per_iteration);
    table.push(("muladd", Width::Scalar, 1, ops));
    s.push_str(
        "struct tdg_fp_kernel {\n    const char *op, *width;\n    int chains;\n    double ops_per_rep;\n    double (*fn)(long);\n};\n",
    );
    let _ = writeln!(s, "#define TDG_FP_KERNELS {}", table.len());
    s.push_str("static const struct tdg_fp_kernel tdg_fp_kernels[] = {\n");
    for (op, width, chains, ops) in &table {
        let _ = writeln!(
            s,
            "    {{\"{op}\", \"{}\", {chains}, {ops}.0, {}}},",
            width.name(),
            fp_kernel_name(op, *width, *chains)
        );
    }
    s.push_str("};\n");
}

/// Every live-value kernel, then the table `cpubench.c` walks.
fn live_kernels(s: &mut String, p: &CpuBenchParams) {
    let mut live = Vec::new();
    for isa in LIVE_ISAS {
        for values in p.live_values.clone() {
            live_kernel(s, isa, values);
            live.push((isa, values));
        }
    }
    s.push_str(
        "struct tdg_live_kernel {\n    const char *isa;\n    int values;\n    double ops_per_rep;\n    double (*fn)(long);\n};\n",
    );
    let _ = writeln!(s, "#define TDG_LIVE_KERNELS {}", live.len());
    s.push_str("static const struct tdg_live_kernel tdg_live_kernels[] = {\n");
    for (isa, values) in &live {
        let _ = writeln!(
            s,
            "    {{\"{}\", {values}, {values}.0, {}}},",
            isa.name(),
            live_kernel_name(*isa, *values)
        );
    }
    s.push_str("};\n");
}

/// a*b+c with a = 1+2^-30, b = 1-2^-30, c = -1: the exact product is
/// 1-2^-60, which rounds to 1 as a double, so a separately rounded multiply
/// gives 0 and a fused one -2^-60.
const FUSED_CHECK: &str = r#"
static volatile double fused_operands[3] = {1.0 + 0x1p-30, 1.0 - 0x1p-30, -1.0};
__attribute__((target("fma"))) static double fused_multiply_add(double a, double b, double c)
{
    return _mm_cvtsd_f64(_mm_fmadd_sd(_mm_set_sd(a), _mm_set_sd(b), _mm_set_sd(c)));
}
static double separate_multiply_add(double a, double b, double c)
{
    return _mm_cvtsd_f64(_mm_add_sd(_mm_mul_sd(_mm_set_sd(a), _mm_set_sd(b)), _mm_set_sd(c)));
}
/* Prints "fused F S": the instruction's result and the two-instruction one. */
static void tdg_fused_check(void)
{
    double a = fused_operands[0], b = fused_operands[1], c = fused_operands[2];
    printf("fused %.17g %.17g\n", fused_multiply_add(a, b, c), separate_multiply_add(a, b, c));
}
"#;

/// Stack accesses of vector registers in each function of a compiler's
/// assembly output (AT&T syntax): spills and reloads. Keyed by function.
pub fn stack_traffic(assembly: &str) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    let mut current: Option<String> = None;
    for line in assembly.lines() {
        // clang follows a function's label with `# @name`.
        let t = line.split('#').next().unwrap_or("").trim_end();
        if !t.starts_with(|c: char| c.is_whitespace() || c == '.') {
            if let Some(label) = t.strip_suffix(':') {
                current = Some(label.to_string());
                out.entry(label.to_string()).or_insert(0);
                continue;
            }
        }
        let Some(f) = &current else { continue };
        let on_stack = t.contains("(%rsp)") || t.contains("(%rbp)");
        let vector = t.contains("%xmm") || t.contains("%ymm") || t.contains("%zmm");
        if on_stack && vector {
            *out.get_mut(f).expect("inserted at its label") += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_traffic_counts_vector_spills_per_function() {
        let asm = "\
tdg_live_scalar_16:
\tpushq\t%rbp
\taddsd\t%xmm1, %xmm0
.L3:
\taddsd\t%xmm2, %xmm1
tdg_live_scalar_17:                     # @tdg_live_scalar_17
\tmovsd\t%xmm3, -8(%rsp)
\taddsd\t-8(%rsp), %xmm4
\tmovq\t%rax, 8(%rsp)
";
        let t = stack_traffic(asm);
        assert_eq!(t["tdg_live_scalar_16"], 0, "{t:?}");
        assert_eq!(t["tdg_live_scalar_17"], 2, "{t:?}");
        assert!(!t.contains_key(".L3"));
    }
}

#[cfg(test)]
mod compile_tests {
    use super::*;

    /// Warning-free under -Wall -Wextra with both compilers the project
    /// supports (each one that is installed; a missing one is said).
    #[test]
    fn generated_source_compiles_warning_free_with_gcc_and_clang() {
        let dir = tempfile::tempdir().unwrap();
        let src = crate::csource::write_program(
            dir.path(),
            "cpu.c",
            &cpubench_source(&CpuBenchParams::default()),
        )
        .unwrap();
        if let Ok(d) = std::env::var("TDG_DUMP_PROBE_C") {
            std::fs::copy(&src, format!("{d}.cpu.c")).unwrap();
        }
        let mut compiled = 0;
        for cc in ["gcc", "clang"] {
            let Ok(cc) = toolchain::CCompiler::find(Some(cc)) else {
                eprintln!("skipped: {cc} is not installed");
                continue;
            };
            cc.compile(&toolchain::CompileJob {
                sources: vec![src.clone()],
                output: dir.path().join(format!("cpu-{}", cc.program)),
                cflags: ["-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-pthread"]
                    .map(String::from)
                    .to_vec(),
                include_dirs: vec![dir.path().to_path_buf()],
                ..Default::default()
            })
            .unwrap();
            compiled += 1;
        }
        assert!(compiled > 0, "no C compiler found");
    }
}
