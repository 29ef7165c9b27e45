//! The driver model: everything the generated driver will do, decided from
//! the spec and the configuration, before any C is written. Templates only
//! lay this out; `tdg explain` describes it in words.

use serde::Serialize;
use spec_lang::ast::{
    ArrayKind, BaseType, CType, Expr, Fill, FlushMethod, FlushSize, Lang, Selection, Spec,
    TimerMethod,
};
use std::collections::BTreeMap;

use crate::cexpr::{self, ExprEnv, NameStyle};
use crate::defaults::MachineDefaults;
use spec_lang::checked::{self, CheckedSpec, OperandDef, PerCall};
use spec_lang::eval::Value;
use spec_lang::vocabulary::Keyword;

/// Why a driver model cannot be built. A checked spec fails here only on
/// facts of the machine or the configuration; `Spec` carries the checker's
/// verdict for callers that hand in a spec `spec_lang::check` never saw.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("{0}")]
    Spec(String),
    #[error("{0}")]
    Define(String),
    #[error("`{0}` is not a routine parameter nor a Macro name; define it in init={{...}} or use Macro({0}, default)")]
    UnknownName(String),
    #[error("`{0}` changes per call (Range/RANDOM) but is used where a fixed value is needed (a size); give it a fixed value")]
    NotConstant(String),
    #[error("{0} varies per call and cannot appear inside another expression; assign it to its own scalar")]
    PerCallInExpression(String),
    #[error("the values of {0} depend on each other in a cycle; break the cycle in init={{...}}")]
    Cycle(String),
    #[error("flush size level L{0} is not a cache this machine reports (it has {1}); pick one of those or a size in KiB")]
    NoSuchCache(u8, String),
    #[error("samples must be at least 1")]
    NoSamples,
    #[error("the sampling budget ends ({max} ms, {max_from}) before it starts ({min} ms, {min_from}); raise --max-time-ms or lower --min-time-ms")]
    SamplingBudget {
        min: u64,
        min_from: &'static str,
        max: u64,
        max_from: &'static str,
    },
}

/// Timing settings the command line (or a caller) imposes; `None` falls
/// back to the spec's `timer={...}`, then to the machine defaults. One
/// struct from `tdg`'s options through `RunOptions` to the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimingOverrides {
    pub timer: Option<TimerMethod>,
    pub samples: Option<u32>,
    pub selection: Option<Selection>,
    pub flush: Option<FlushMethod>,
    pub flush_kib: Option<u64>,
    /// Flush sized from this cache level (overrides the spec, not flush_kib).
    pub flush_level: Option<u8>,
    pub min_interval_ns: Option<u64>,
    /// Spread the samples over at least this much wall time (ms).
    pub min_time_ms: Option<u64>,
    /// Stop sampling here even if the figure has not settled (ms).
    pub max_time_ms: Option<u64>,
    /// The halves of the run must agree within this many per cent.
    pub stable_pct: Option<f64>,
    pub flush_all_cpus: bool,
    pub pin_cpu: Option<u32>,
    /// Relative tolerance for verification; `None`: per element type.
    pub tolerance: Option<f64>,
}

/// Everything the model is built under besides the spec.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    pub timing: TimingOverrides,
    /// `-D NAME=VALUE` overrides, used for explanations (the driver itself
    /// receives them as compiler defines).
    pub defines: BTreeMap<String, String>,
    pub machine: MachineDefaults,
}

impl DriverConfig {
    pub fn new(machine: MachineDefaults) -> Self {
        DriverConfig {
            timing: TimingOverrides::default(),
            defines: BTreeMap::new(),
            machine,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DriverModel {
    pub routine: RoutineModel,
    pub includes: Vec<String>,
    pub macros: Vec<MacroDefault>,
    /// Scalars in initialisation order (dependencies first).
    pub scalars: Vec<ScalarModel>,
    pub operands: Vec<OperandModel>,
    pub flush: FlushPlan,
    pub timing: TimingPlan,
    pub guard: OverflowGuard,
    pub verify: Option<VerifyPlan>,
    pub flop: Option<FlopPlan>,
    /// C statements (one call each) for the timed loop, the dummy call and
    /// the two verification calls.
    pub calls: CallText,
    /// True when some scalar changes per call (Range/RANDOM).
    pub per_call_scalars: bool,
    /// The `tdg_driver` version of the driver's `--json` line.
    pub json_version: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct RoutineModel {
    pub name: String,
    /// Linker symbol (Fortran: lower case with a trailing underscore).
    pub symbol: String,
    pub fortran: bool,
    /// Prototype of the user's implementation.
    pub prototype: String,
    /// `static RET tdg_reference(PARAMS) { body }` when a body is given.
    pub reference: Option<String>,
    pub returns_value: bool,
    pub ret_c_type: String,
    /// How a return value of this type is folded into a double sink.
    pub ret_kind: ElemKind,
}

#[derive(Debug, Clone, Serialize)]
pub struct MacroDefault {
    pub name: String,
    /// `TDG_MACRO_<name>`, what the driver's code uses.
    pub c_name: String,
    pub default_c: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ScalarKind {
    Fixed,
    /// begin on the first call, `+= incr` after each call.
    Range {
        incr_c: String,
    },
    /// Fresh uniform value each call.
    Random {
        lo_c: String,
        hi_c: String,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalarModel {
    pub name: String,
    /// Type of the struct field holding it (qualifiers dropped).
    pub c_type: String,
    pub init_c: String,
    pub kind: ScalarKind,
    pub is_range: bool,
    pub is_random: bool,
    pub integral: bool,
    /// Source text of the value, for explanations.
    pub text: String,
    /// Initial value when computable (explain).
    #[serde(skip)]
    pub value: Option<Value>,
    /// The spec gave no init: why the driver passes the value it does.
    pub implicit_reason: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ElemKind {
    Real,
    Complex,
    Integer,
    Pointer,
    Opaque,
    Void,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CacheState {
    /// Evicted before every timed call (or rotated through working sets).
    Flushed,
    /// Kept cache resident (re-read after any flush, never rotated).
    Warm,
    /// Neither evicted nor re-read on purpose (the reference generator's
    /// "No Flush"): timed in the state its initialisation and the previous
    /// calls leave it. One copy, never rotated; a read flush made for other
    /// operands evicts it too.
    Unflushed,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Storage {
    /// One aligned heap block (Vector, Matrix: column-major).
    Heap,
    /// A row-pointer array and one aligned block per row (Array2D).
    RowPointers,
    /// File-scope static array (SVector, SMatrix).
    Static,
}

#[derive(Debug, Clone, Serialize)]
pub struct OperandModel {
    pub name: String,
    /// Parameter type as the routine receives it, e.g. `const double *`.
    pub param_c_type: String,
    pub elem_c_type: String,
    pub elem_kind: ElemKind,
    pub storage: Storage,
    pub is_static: bool,
    pub row_pointers: bool,
    /// Number of blocks (rows for Array2D, else 1) and elements per block.
    pub rows_c: String,
    pub cols_c: String,
    /// File-scope element count for static storage.
    pub static_count_c: String,
    pub dims_text: Vec<String>,
    pub align: u64,
    pub misalign: u64,
    pub fill: FillPlan,
    pub cache: CacheState,
    /// `cache == Warm`: re-read just before each single-call sample.
    pub warm: bool,
    /// `cache == Flushed`: evicted (clflush) or rotated through working sets.
    pub flushed: bool,
    /// The routine may write it (non-const pointee).
    pub is_output: bool,
    /// Elements per block and blocks, when computable (explain).
    #[serde(skip)]
    pub rows_value: Option<i64>,
    #[serde(skip)]
    pub cols_value: Option<i64>,
    /// Element size in bytes when known without a compiler.
    #[serde(skip)]
    pub elem_bytes: Option<u64>,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FillPlan {
    pub kind: &'static str,
    /// C expression for element `k` (an index in element order); empty for
    /// ZERO (calloc'd storage is already zero) and FILE.
    pub value_c: String,
    pub file: Option<String>,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlushPlan {
    pub method: &'static str,
    pub method_c: &'static str,
    pub kib: u64,
    /// Why this size: "--flush-kib", "spec: L2", "machine: last-level cache (sysfs)".
    pub kib_source: String,
    pub all_cpus: bool,
    /// Some operand is `Flushed`. When none is, the driver runs no flush at
    /// all: a flush would only evict what the spec leaves in cache, the
    /// harness's own code and stack and the routine's instructions, and
    /// charge that to the routine (seen: an empty routine at 120-140 ns
    /// instead of ~0).
    pub any_operand_flushed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimingPlan {
    pub method: &'static str,
    pub method_c: &'static str,
    pub samples: u32,
    pub selection: &'static str,
    pub selection_median: bool,
    pub min_interval_ns: u64,
    pub min_interval_source: String,
    /// The interval is the machine's default (the probe's, for rdtscp), not
    /// one the spec or the command line chose: a driver using another timer
    /// replaces it with that timer's own (issue 15).
    pub min_interval_is_machine_default: bool,
    pub pin_cpu: i64,
    pub sampling: SamplingPlan,
}

/// When a driver stops taking samples (its flags can still change it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SamplingPlan {
    /// Samples are spread over at least this much wall time: this kind of
    /// machine alternates between a fast and a slow state for stretches of
    /// milliseconds to seconds, and a minimum over a fraction of a
    /// millisecond is whichever state that moment offered.
    pub min_time_ms: u64,
    /// Sampling stops here even if the figure has not settled; the result
    /// is then marked unstable. With set-up and verification a default
    /// driver process stays under half a second.
    pub max_time_ms: u64,
    /// The estimator over the first and the second half of the samples must
    /// agree within this relative difference (per cent).
    pub stable_pct: f64,
    /// Where the budget came from: "default", "spec timer={...}", "command
    /// line", or a mix ("min_time from the spec, ...").
    #[serde(skip)]
    pub source: &'static str,
}

/// The budget when neither the spec nor the command line sets one.
pub const DEFAULT_SAMPLING: SamplingPlan = SamplingPlan {
    min_time_ms: 100,
    max_time_ms: 250,
    stable_pct: 0.5,
    source: "default",
};

/// Command line over the spec's `timer={...}` over [`DEFAULT_SAMPLING`],
/// setting by setting.
fn resolve_sampling(
    cli: &TimingOverrides,
    spec: &spec_lang::ast::TimerClause,
) -> Result<SamplingPlan, ModelError> {
    fn pick<T>(cli: Option<T>, spec: Option<T>, default: T) -> (T, &'static str) {
        match (cli, spec) {
            (Some(v), _) => (v, "command line"),
            (None, Some(v)) => (v, "spec timer={...}"),
            (None, None) => (default, "default"),
        }
    }
    let d = DEFAULT_SAMPLING;
    let (min_time_ms, min_from) = pick(cli.min_time_ms, spec.min_time_ms, d.min_time_ms);
    let (max_time_ms, max_from) = pick(cli.max_time_ms, spec.max_time_ms, d.max_time_ms);
    let (stable_pct, pct_from) = pick(cli.stable_pct, spec.stable_pct, d.stable_pct);
    if max_time_ms < min_time_ms {
        return Err(ModelError::SamplingBudget {
            min: min_time_ms,
            min_from,
            max: max_time_ms,
            max_from,
        });
    }
    let froms = [min_from, max_from, pct_from];
    let source = if froms.iter().all(|f| *f == froms[0]) {
        froms[0]
    } else if froms.contains(&"command line") && froms.contains(&"spec timer={...}") {
        "spec timer={...} and command line"
    } else if froms.contains(&"command line") {
        "command line, the rest default"
    } else {
        "spec timer={...}, the rest default"
    };
    Ok(SamplingPlan {
        min_time_ms,
        max_time_ms,
        stable_pct,
        source,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct OverflowGuard {
    /// Floating scalar whose sign flips each time the working sets wrap
    /// (the paper's `alpha` trick) in multi-call timing.
    pub alternate: Option<String>,
    /// Outputs restored from a pristine copy before each single-call sample.
    pub restore: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyPlan {
    pub operands: Vec<String>,
    pub compare_return: bool,
    pub tolerance: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlopPlan {
    pub text: String,
    pub c_expr: String,
    /// Flops of one call at the initial scalar values (explain).
    #[serde(skip)]
    pub value: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallText {
    pub timed: String,
    pub dummy: String,
    pub verify_impl: String,
    pub verify_ref: String,
}

impl DriverModel {
    /// The model of a checked spec (its `-D` overrides already applied).
    pub fn from_checked(spec: &CheckedSpec, cfg: &DriverConfig) -> Result<DriverModel, ModelError> {
        build(spec, cfg)
    }

    /// The model of a parsed spec: checks it (the first problem is the
    /// error), applies `cfg.defines` to its macros, then [`Self::from_checked`].
    pub fn from_spec(spec: &Spec, cfg: &DriverConfig) -> Result<DriverModel, ModelError> {
        let (completed, _warnings) = spec_lang::implicit::complete(spec);
        let spec = &completed;
        // A model is a driver: the spec must pass the driver's checks too
        // (values for every parameter, a body to verify `returns` against).
        let mut problems = spec_lang::check::problems(spec, "");
        problems.extend(spec_lang::check::driver_problems(spec, ""));
        if let Some(d) = problems.first() {
            return Err(ModelError::Spec(match &d.hint {
                Some(h) => format!("{}; {h}", d.message),
                None => d.message.clone(),
            }));
        }
        let defines: Vec<(String, String)> = cfg
            .defines
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let overrides = checked::spec_overrides(spec, &defines).map_err(ModelError::Define)?;
        let checked =
            checked::resolve(spec, &overrides).map_err(|e| ModelError::Spec(e.to_string()))?;
        build(&checked, cfg)
    }

    pub fn operand(&self, name: &str) -> Option<&OperandModel> {
        self.operands.iter().find(|o| o.name == name)
    }
}

fn elem_kind(t: &CType) -> ElemKind {
    if t.pointers > 0 {
        return ElemKind::Pointer;
    }
    match &t.base {
        BaseType::Void => ElemKind::Void,
        BaseType::FloatComplex | BaseType::DoubleComplex => ElemKind::Complex,
        b if b.is_floating() => ElemKind::Real,
        b if b.is_integral() => ElemKind::Integer,
        _ => ElemKind::Opaque,
    }
}

/// `const double* X`: a parameter declaration.
fn decl(t: &CType, name: &str) -> String {
    format!("{} {name}", t.text())
}

fn default_tolerance(kind: &BaseType) -> f64 {
    match kind {
        BaseType::Float | BaseType::FloatComplex => 1e-4,
        _ => 1e-9,
    }
}

/// Per-operand fill seed: a stable hash of the name, so every working-set
/// copy and the verification copies hold the same data.
fn seed_for(name: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn build(checked: &CheckedSpec, cfg: &DriverConfig) -> Result<DriverModel, ModelError> {
    let spec = &checked.spec;
    let params = &spec.routine.params;
    let scalar_exprs: BTreeMap<String, (Expr, bool)> = checked
        .scalars
        .iter()
        .map(|s| (s.name.clone(), (s.expr.clone(), s.is_fixed())))
        .collect();
    let macros: BTreeMap<String, Expr> = checked
        .macros
        .iter()
        .map(|m| (m.name.clone(), m.default.clone()))
        .collect();
    let env = ExprEnv {
        scalars: &scalar_exprs,
        macros: &macros,
    };

    let mut macro_defaults = Vec::new();
    for m in &checked.macros {
        macro_defaults.push(MacroDefault {
            name: m.name.clone(),
            c_name: cexpr::macro_c_name(&m.name),
            default_c: cexpr::to_c(&m.default, &env, NameStyle::Constant, false)?,
        });
    }

    let mut scalars = Vec::new();
    for sc in &checked.scalars {
        let mut field_ty = sc.ty.clone();
        field_ty.is_const = sc.ty.is_pointer() && sc.ty.is_const;
        let c_type = field_ty.text();
        let integral = sc.ty.pointers == 0 && sc.ty.base.is_integral();
        let c = |e: &Expr| cexpr::to_c(e, &env, NameStyle::Runtime, false);
        let (init_c, kind) = match &sc.per_call {
            PerCall::Range { begin, incr } => (c(begin)?, ScalarKind::Range { incr_c: c(incr)? }),
            PerCall::Random { bounds: None } => {
                let (lo, hi) = if integral {
                    ("0".to_string(), "100".to_string())
                } else {
                    ("-0.5".to_string(), "0.5".to_string())
                };
                (String::new(), ScalarKind::Random { lo_c: lo, hi_c: hi })
            }
            PerCall::Random {
                bounds: Some((lo, hi)),
            } => (
                String::new(),
                ScalarKind::Random {
                    lo_c: c(lo)?,
                    hi_c: c(hi)?,
                },
            ),
            PerCall::Fixed => (c(&sc.expr)?, ScalarKind::Fixed),
        };
        scalars.push(ScalarModel {
            name: sc.name.clone(),
            c_type,
            init_c,
            is_range: matches!(kind, ScalarKind::Range { .. }),
            is_random: matches!(kind, ScalarKind::Random { .. }),
            kind,
            integral,
            text: cexpr::describe(&sc.expr),
            value: sc.value,
            implicit_reason: sc
                .implicit
                .then_some(spec_lang::implicit::IMPLICIT_SCALAR_REASON),
        });
    }

    // Flush and timing plans.
    let tc = spec.timer.clone().unwrap_or_default();
    let flush_method = cfg.timing.flush.or(tc.flush).unwrap_or(FlushMethod::Read);
    let (flush_kib, kib_source) = resolve_flush_kib(
        cfg,
        cfg.timing
            .flush_level
            .map(FlushSize::Level)
            .or(tc.flush_size),
    )?;
    let timer = cfg.timing.timer.or(tc.method).unwrap_or(TimerMethod::Cycle);
    let samples = cfg.timing.samples.or(tc.samples).unwrap_or(7);
    if samples == 0 {
        return Err(ModelError::NoSamples);
    }
    // ATLAS: min for wall-clock timers (noise only adds), median for CPU time
    // (its error goes both ways).
    let selection = cfg
        .timing
        .selection
        .or(tc.select)
        .unwrap_or(if timer == TimerMethod::Cpu {
            Selection::Median
        } else {
            Selection::Min
        });
    let sampling = resolve_sampling(&cfg.timing, &tc)?;
    let min_interval_is_machine_default =
        cfg.timing.min_interval_ns.is_none() && tc.min_interval_ns.is_none();
    let (min_interval_ns, min_interval_source) =
        match (cfg.timing.min_interval_ns, tc.min_interval_ns) {
            (Some(v), _) => (v, "command line".to_string()),
            (None, Some(v)) => (v, "spec timer={...}".to_string()),
            (None, None) => (
                cfg.machine.min_interval_ns,
                cfg.machine.min_interval_source.clone(),
            ),
        };

    // Operands.
    let mut operands = Vec::new();
    // A flush method asked for on the command line means "time it cold":
    // it flushes the operands the spec leaves unmarked too, as `--flush none`
    // leaves every operand in cache.
    let flush_unmarked = matches!(
        cfg.timing.flush,
        Some(FlushMethod::Read | FlushMethod::Clflush)
    );
    for op in &checked.operands {
        operands.push(build_operand(op, &env, flush_method, flush_unmarked)?);
    }

    // Verification: the spec's outputs (and return value) against its body.
    let nothing_to_compare = spec.returns.is_empty() && !ret_is_value(spec);
    let verify = if spec.routine.body.is_none() || nothing_to_compare {
        None
    } else {
        let mut names = Vec::new();
        let mut tol: f64 = 0.0;
        for r in spec
            .returns
            .iter()
            .filter(|r| r.name != spec.routine.name.name)
        {
            if let Some(op) = checked.operands.iter().find(|o| o.name == r.name) {
                names.push(op.name.clone());
                tol = tol.max(default_tolerance(&op.param_ty.base));
            }
        }
        if ret_is_value(spec) {
            tol = tol.max(default_tolerance(&spec.routine.ret.base));
        }
        Some(VerifyPlan {
            operands: names,
            compare_return: ret_is_value(spec),
            tolerance: cfg
                .timing
                .tolerance
                .unwrap_or(if tol > 0.0 { tol } else { 1e-9 }),
        })
    };

    // Overflow guard: the paper's alpha trick when the routine has a real
    // `alpha` that is fixed; outputs restored between single-call samples.
    let alternate = scalars
        .iter()
        .find(|s| {
            s.name.eq_ignore_ascii_case("alpha")
                && !s.integral
                && s.kind == ScalarKind::Fixed
                && params
                    .iter()
                    .any(|p| p.name.name == s.name && p.ty.pointers == 0 && p.ty.base.is_floating())
        })
        .map(|s| s.name.clone());
    let restore = operands
        .iter()
        .filter(|o| o.is_output)
        .map(|o| o.name.clone())
        .collect();

    let flop = match &spec.flop {
        Some(f) => Some(FlopPlan {
            text: f.text.clone(),
            c_expr: cexpr::to_c(&f.expr, &env, NameStyle::Runtime, true)?,
            value: checked.flop_count(),
        }),
        None => None,
    };

    let routine = build_routine(spec);
    let calls = build_calls(spec, &operands);
    let per_call_scalars = scalars.iter().any(|s| s.kind != ScalarKind::Fixed);
    let any_operand_flushed = operands.iter().any(|o| o.flushed);

    Ok(DriverModel {
        routine,
        includes: spec.includes.iter().map(|i| i.text.clone()).collect(),
        macros: macro_defaults,
        scalars,
        operands,
        flush: FlushPlan {
            method: flush_method.spelling(),
            method_c: flush_method.c_name(),
            kib: flush_kib,
            kib_source,
            all_cpus: cfg.timing.flush_all_cpus,
            any_operand_flushed,
        },
        timing: TimingPlan {
            method: timer.spelling(),
            method_c: timer.c_name(),
            samples,
            selection: selection.spelling(),
            selection_median: selection == Selection::Median,
            min_interval_ns,
            min_interval_source,
            min_interval_is_machine_default,
            pin_cpu: cfg.timing.pin_cpu.map(|c| c as i64).unwrap_or(-1),
            sampling,
        },
        guard: OverflowGuard { alternate, restore },
        verify,
        flop,
        calls,
        per_call_scalars,
        json_version: crate::run::DRIVER_JSON_VERSION,
    })
}

fn ret_is_value(spec: &Spec) -> bool {
    let r = &spec.routine.ret;
    !(r.pointers == 0 && r.base == BaseType::Void)
}

/// A flush sized from a cache level reads this many times the level's
/// size. Caches do not replace LRU, so reading exactly their size leaves
/// part of the operands behind (the paper's point; measured here: a 256 KiB
/// dot was 3.2x its warm time after a 32 MiB read flush of the 32 MiB L3,
/// 5.9x after 64 MiB, where further growth stopped mattering).
pub const FLUSH_OVERSIZE: u64 = 2;

fn resolve_flush_kib(
    cfg: &DriverConfig,
    spec_size: Option<FlushSize>,
) -> Result<(u64, String), ModelError> {
    if let Some(k) = cfg.timing.flush_kib {
        return Ok((k, "command line".into()));
    }
    let m = &cfg.machine;
    let have = || {
        m.caches
            .iter()
            .map(|c| format!("L{} {} KiB", c.level, c.kib))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match spec_size {
        Some(FlushSize::KiB(k)) => Ok((k, "spec timer={...}".into())),
        // Flushing the last level means flushing everything: the measured
        // full flush, not a multiple of the (effective, shared) LLC size,
        // which on this kind of L3 leaves reused lines behind.
        Some(FlushSize::Level(l)) => match (m.full_flush_kib, m.llc()) {
            (Some(k), Some(llc)) if llc.level == l => Ok((k, m.full_flush_source.clone())),
            _ => m
                .level(l)
                .map(|c| {
                    (
                        c.kib * FLUSH_OVERSIZE,
                        format!(
                            "{FLUSH_OVERSIZE} x L{l} size {} KiB ({})",
                            c.kib, m.caches_source
                        ),
                    )
                })
                .ok_or_else(|| ModelError::NoSuchCache(l, have())),
        },
        Some(FlushSize::Llc) | None => match m.full_flush_kib {
            // Measured: the smallest read that evicts a warm operand.
            Some(k) => Ok((k, m.full_flush_source.clone())),
            None => {
                let llc = m.llc().ok_or_else(|| ModelError::NoSuchCache(0, have()))?;
                Ok((
                    llc.kib * FLUSH_OVERSIZE,
                    format!(
                        "{FLUSH_OVERSIZE} x last-level cache L{} {} KiB ({})",
                        llc.level, llc.kib, m.caches_source
                    ),
                ))
            }
        },
    }
}

fn build_operand(
    op: &OperandDef,
    env: &ExprEnv,
    flush_method: FlushMethod,
    flush_unmarked: bool,
) -> Result<OperandModel, ModelError> {
    let (name, param_ty, a) = (op.name.as_str(), &op.param_ty, &op.array);
    let elem = &a.elem;
    let elem_c = {
        let mut t = elem.clone();
        t.is_const = false;
        t.text()
    };
    let kind = elem_kind(elem);
    let storage = match a.kind {
        ArrayKind::Vector | ArrayKind::Matrix => Storage::Heap,
        ArrayKind::Array2D => Storage::RowPointers,
        ArrayKind::SVector | ArrayKind::SMatrix => Storage::Static,
    };
    let dim_c = |e: &Expr, style| cexpr::to_c(e, env, style, false);
    let dims_rt: Vec<String> = a
        .dims
        .iter()
        .map(|d| dim_c(d, NameStyle::Runtime))
        .collect::<Result<_, _>>()?;
    let dims_val: Vec<i64> = op.dims.iter().map(|&d| d as i64).collect();
    let (rows_c, cols_c, rows_value, cols_value) = match storage {
        Storage::RowPointers => (
            format!("(size_t){}", dims_rt[0]),
            format!("(size_t){}", dims_rt[1]),
            Some(dims_val[0]),
            Some(dims_val[1]),
        ),
        _ => {
            let cols = dims_rt
                .iter()
                .map(|d| format!("(size_t){d}"))
                .collect::<Vec<_>>()
                .join(" * ");
            let v = dims_val.iter().try_fold(1i64, |acc, d| acc.checked_mul(*d));
            ("(size_t)1".to_string(), cols, Some(1), v)
        }
    };
    let static_count_c = if storage == Storage::Static {
        a.dims
            .iter()
            .map(|d| dim_c(d, NameStyle::Constant).map(|c| format!("(size_t){c}")))
            .collect::<Result<Vec<_>, _>>()?
            .join(" * ")
    } else {
        String::new()
    };

    let align = op.align;
    let misalign = op.misalign.unwrap_or(0);
    // As in the reference generator, only `flush` operands are flushed; an
    // unmarked one is timed as its initialisation and the previous calls
    // leave it ("No Flush"). Flushing off leaves every operand so, except
    // that `warm` ones are still re-read as the spec asks.
    let cache = if a.is_warm() {
        CacheState::Warm
    } else if flush_method != FlushMethod::None && (a.is_flushed() || flush_unmarked) {
        CacheState::Flushed
    } else {
        CacheState::Unflushed
    };

    let fill = build_fill(&elem_c, kind, &a.fill, env)?;
    let is_output = param_ty.pointers > 0 && !param_ty.is_const;
    let mut param_t = param_ty.clone();
    if param_t.pointers == 0 {
        param_t.pointers = 1;
    }
    Ok(OperandModel {
        name: name.to_string(),
        param_c_type: param_t.text(),
        elem_c_type: elem_c,
        elem_kind: kind,
        storage,
        is_static: storage == Storage::Static,
        row_pointers: storage == Storage::RowPointers,
        rows_c,
        cols_c,
        static_count_c,
        dims_text: a.dims.iter().map(cexpr::describe).collect(),
        align,
        misalign,
        fill,
        cache,
        warm: cache == CacheState::Warm,
        flushed: cache == CacheState::Flushed,
        is_output,
        rows_value,
        cols_value,
        elem_bytes: elem.base.size_bytes(),
        seed: seed_for(name),
    })
}

/// How the operand's elements are filled. `spec_lang::check` has already
/// matched each fill to its element type and storage.
fn build_fill(
    elem_c: &str,
    kind: ElemKind,
    fill: &Fill,
    env: &ExprEnv,
) -> Result<FillPlan, ModelError> {
    let cast = |v: String| format!("({elem_c})({v})");
    let c = |e: &Expr| cexpr::to_c(e, env, NameStyle::Runtime, false);
    Ok(match fill {
        Fill::Random(_) if kind == ElemKind::Opaque => FillPlan {
            // Structs of doubles/complex (e.g. an SU(3) matrix) get mixed-sign
            // doubles over their storage; other sizes get random bytes.
            kind: "random_words",
            value_c: String::new(),
            file: None,
            text: format!(
                "pseudo-random doubles in [-0.5, 0.5) over each {elem_c} (random bytes if its size is not a multiple of 8)"
            ),
        },
        Fill::Random(_) => {
            let v = match kind {
                // Mixed-sign values keep sums of products bounded when the
                // routine accumulates across repeated calls.
                ElemKind::Real => cast("tdg_urand()".into()),
                ElemKind::Complex => cast("tdg_urand() + tdg_urand() * I".into()),
                _ => {
                    if elem_c.starts_with("unsigned")
                        || elem_c.starts_with("uint")
                        || elem_c == "size_t"
                        || elem_c == "_Bool"
                    {
                        cast(if elem_c == "_Bool" {
                            "tdg_rand_int(0, 1)".into()
                        } else {
                            "tdg_rand_int(0, 100)".into()
                        })
                    } else {
                        cast("tdg_rand_int(-50, 50)".into())
                    }
                }
            };
            FillPlan {
                kind: "random",
                value_c: v,
                file: None,
                text: match kind {
                    ElemKind::Real | ElemKind::Complex => {
                        "pseudo-random, uniform in [-0.5, 0.5) (mixed sign)".into()
                    }
                    _ => "pseudo-random small integers".into(),
                },
            }
        }
        Fill::RandomRange { lo, hi, .. } => {
            let (l, h) = (c(lo)?, c(hi)?);
            let v = match kind {
                ElemKind::Integer => cast(format!("tdg_rand_int((long long)({l}), (long long)({h}))")),
                ElemKind::Complex => cast(format!(
                    "tdg_rand_real((double)({l}), (double)({h})) + tdg_rand_real((double)({l}), (double)({h})) * I"
                )),
                _ => cast(format!("tdg_rand_real((double)({l}), (double)({h}))")),
            };
            FillPlan {
                kind: "random_range",
                value_c: v,
                file: None,
                text: format!(
                    "pseudo-random, uniform in [{}, {}]",
                    cexpr::describe(lo),
                    cexpr::describe(hi)
                ),
            }
        }
        Fill::Zero(_) => FillPlan {
            kind: "zero",
            value_c: String::new(),
            file: None,
            text: "zero (calloc'd; pages written before timing so none is lazily zeroed)".into(),
        },
        Fill::Const(e, _) => FillPlan {
            kind: "const",
            value_c: cast(c(e)?),
            file: None,
            text: format!("every element {}", cexpr::describe(e)),
        },
        Fill::Seq(_) => FillPlan {
            kind: "seq",
            value_c: cast("k".into()),
            file: None,
            text: "0, 1, 2, ... in element order".into(),
        },
        Fill::File(path, _) => FillPlan {
            kind: "file",
            value_c: String::new(),
            file: Some(cexpr::c_string_literal(path)),
            text: format!("raw bytes from {path}"),
        },
    })
}

fn build_routine(spec: &Spec) -> RoutineModel {
    let r = &spec.routine;
    let fortran = spec.lang == Lang::Fortran;
    let symbol = spec.symbol();
    let ret_ty = r.ret.text();
    let params_c: Vec<String> = r
        .params
        .iter()
        .map(|p| {
            if fortran {
                let mut t = p.ty.clone();
                t.pointers += u8::from(t.pointers == 0);
                decl(&t, &p.name.name)
            } else {
                decl(&p.ty, &p.name.name)
            }
        })
        .collect();
    let plist = if params_c.is_empty() {
        "void".to_string()
    } else {
        params_c.join(", ")
    };
    let prototype = format!("{ret_ty} {symbol}({plist});");
    let reference = r.body.as_ref().map(|b| {
        let ref_params: Vec<String> = r.params.iter().map(|p| decl(&p.ty, &p.name.name)).collect();
        let rp = if ref_params.is_empty() {
            "void".to_string()
        } else {
            ref_params.join(", ")
        };
        // The spec's body need not use every parameter; keep -Wextra quiet.
        let unused: String = r
            .params
            .iter()
            .map(|p| format!("    (void){};\n", p.name.name))
            .collect();
        format!(
            "static {ret_ty} tdg_reference({rp})\n{{\n{unused}{}}}",
            b.text
        )
    });
    RoutineModel {
        name: r.name.name.clone(),
        symbol,
        fortran,
        prototype,
        reference,
        returns_value: ret_is_value(spec),
        ret_c_type: ret_ty,
        ret_kind: elem_kind(&r.ret),
    }
}

/// A C file implementing the routine with the spec's own body, so a spec
/// with a body can be timed without `--impl` (the reference generator's
/// specs carry their implementation this way). `None` without a body.
/// The body keeps the spec's parameter types; a Fortran symbol receives
/// its scalars by reference and passes them on by value.
pub fn body_as_implementation(spec: &Spec) -> Option<String> {
    let routine = build_routine(spec);
    let reference = routine.reference?;
    let fortran = spec.lang == Lang::Fortran;
    let args: Vec<String> = spec
        .routine
        .params
        .iter()
        .map(|p| {
            let by_ref = fortran && p.ty.pointers == 0;
            format!("{}{}", if by_ref { "*" } else { "" }, p.name.name)
        })
        .collect();
    let call = format!("tdg_reference({})", args.join(", "));
    let call = if routine.returns_value {
        format!("return {call};")
    } else {
        format!("{call};")
    };
    let includes: String = spec
        .includes
        .iter()
        .map(|i| format!("{}\n", i.text))
        .collect();
    let definition = routine.prototype.trim_end_matches(';');
    Some(format!(
        "/* {name}: the body of its spec, timed as the implementation (tdg run without --impl). */\n\
         {includes}#include <complex.h>\n#include <math.h>\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n\n\
         {prototype}\n\n{reference}\n\n{definition}\n{{\n    {call}\n}}\n",
        name = routine.name,
        prototype = routine.prototype,
    ))
}

/// The four call statements. `ops(name)` spells how an operand's pointer is
/// reached in each context.
fn build_calls(spec: &Spec, operands: &[OperandModel]) -> CallText {
    let fortran = spec.lang == Lang::Fortran;
    let r = &spec.routine;
    let make = |callee: &str, scal: &str, op: &dyn Fn(&str) -> String, by_ref: bool| {
        let args: Vec<String> = r
            .params
            .iter()
            .map(|p| {
                let n = &p.name.name;
                match operands.iter().find(|o| o.name == *n) {
                    Some(o) => format!("({}){}", o.param_c_type, op(n)),
                    None if by_ref => format!("&{scal}{n}"),
                    None => format!("{scal}{n}"),
                }
            })
            .collect();
        let call = format!("{callee}({})", args.join(", "));
        sink_call(&call, r, ret_is_value(spec))
    };
    CallText {
        timed: make(
            &spec.symbol(),
            "tdg_S.",
            &|n| format!("tdg_users_{n}[tdg_set]"),
            fortran,
        ),
        dummy: make(
            &spec.symbol(),
            "tdg_D->",
            &|n| format!("tdg_users_{n}[0]"),
            fortran,
        ),
        verify_impl: make(
            &spec.symbol(),
            "tdg_V->",
            &|n| format!("tdg_vimp_{n}.user"),
            fortran,
        ),
        verify_ref: make(
            "tdg_reference",
            "tdg_V->",
            &|n| format!("tdg_vref_{n}.user"),
            false,
        ),
    }
}

/// Folds a call's return value into `tdg_ret_acc` so the call cannot be
/// dropped or hoisted as a pure function (the paper's `dot += alpha*...`).
fn sink_call(call: &str, r: &spec_lang::ast::Routine, has_value: bool) -> String {
    if !has_value {
        return format!("{call};");
    }
    let ty = r.ret.text();
    match elem_kind(&r.ret) {
        ElemKind::Real | ElemKind::Integer => format!("tdg_ret_acc += (double)({call});"),
        ElemKind::Complex => {
            format!("{{ {ty} tdg_z = {call}; tdg_ret_acc += creal(tdg_z) + cimag(tdg_z); }}")
        }
        ElemKind::Pointer => format!("tdg_ret_acc += (double)(size_t)({call});"),
        _ => format!(
            "{{ {ty} tdg_r = {call}; tdg_ret_acc += (double)((const unsigned char *)&tdg_r)[0]; }}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> MachineDefaults {
        MachineDefaults::fixed_for_tests()
    }

    #[test]
    fn measured_full_flush_is_the_default_and_says_where_it_came_from() {
        let mut machine = machine();
        machine.full_flush_kib = Some(96 * 1024);
        machine.full_flush_source = "tdg probe: measured".into();
        let m = model(GEMM, &DriverConfig::new(machine.clone()));
        assert_eq!(m.flush.kib, 96 * 1024);
        assert_eq!(m.flush.kib_source, "tdg probe: measured");
        assert_eq!(m.timing.min_interval_source, "test machine");
        // A cache level below the last still means that level's (effective)
        // size; the last level means the measured full flush.
        let src = format!("{GEMM}timer={{ flush_size=L2; }};\n");
        let m = model(&src, &DriverConfig::new(machine.clone()));
        assert_eq!(m.flush.kib, 1024 * FLUSH_OVERSIZE);
        let src = format!("{GEMM}timer={{ flush_size=L3; }};\n");
        let m = model(&src, &DriverConfig::new(machine));
        assert_eq!(m.flush.kib, 96 * 1024);
    }

    const GEMM: &str = r#"
routine=void ATL_USERMM(const int M, const int N, const int K,
    const double alpha, const double* A, const int lda,
    const double* B, const int ldb, const double beta,
    double* C, const int ldc);
init={
  M=Macro(MS,72); N=Macro(NS,72); K=Macro(KS,72);
  lda=MS; ldb=KS; ldc=MS; alpha=1; beta=1;
  A=Matrix(double, M, K, RANDOM, flush|align(16));
  B=Matrix(double, K, N, RANDOM, flush|align(16));
  C=Matrix(double, M, N, RANDOM, warm|align(16));
};
flop="2*M*N*K+M*N";
"#;

    fn model(src: &str, cfg: &DriverConfig) -> DriverModel {
        let spec = spec_lang::parse(src, "t.spec").unwrap();
        DriverModel::from_spec(&spec, cfg).unwrap()
    }

    #[test]
    fn gemm_plan_follows_the_spec_and_the_overrides() {
        let mut cfg = DriverConfig::new(machine());
        cfg.defines.insert("MS".into(), "100".into());
        let m = model(GEMM, &cfg);
        assert_eq!(m.macros.len(), 3);
        let a = m.operand("A").unwrap();
        assert_eq!((a.rows_value, a.cols_value), (Some(1), Some(100 * 72)));
        assert_eq!(a.cache, CacheState::Flushed);
        assert!(!a.is_output);
        let c = m.operand("C").unwrap();
        assert_eq!(c.cache, CacheState::Warm);
        assert!(c.is_output);
        assert_eq!(
            m.flop.as_ref().unwrap().value,
            Some(2.0 * 100.0 * 72.0 * 72.0 + 7200.0)
        );
        // alpha is a fixed real scalar: the paper's sign-alternation guard.
        assert_eq!(m.guard.alternate.as_deref(), Some("alpha"));
        assert_eq!(m.guard.restore, vec!["C".to_string()]);
        // Default flush: twice the last-level cache.
        assert_eq!(m.flush.kib, 2 * 32768);
        assert_eq!(m.timing.selection, "min");
        assert!(m.verify.is_none());
    }

    #[test]
    fn cpu_time_defaults_to_the_median_and_levels_size_the_flush() {
        let mut cfg = DriverConfig::new(machine());
        cfg.timing.timer = Some(TimerMethod::Cpu);
        cfg.timing.flush_level = Some(1);
        let m = model(GEMM, &cfg);
        assert_eq!(m.timing.selection, "median");
        assert_eq!(m.flush.kib, 64);
        cfg.timing.flush_level = Some(4);
        let spec = spec_lang::parse(GEMM, "t.spec").unwrap();
        assert!(matches!(
            DriverModel::from_spec(&spec, &cfg),
            Err(ModelError::NoSuchCache(4, _))
        ));
    }

    #[test]
    fn spec_timer_clause_is_the_default_and_the_command_line_wins() {
        let src = format!(
            "{GEMM}timer={{ method=wall; samples=11; select=median; flush=clflush; flush_size=L2; min_interval=1ms; }};\n"
        );
        let mut cfg = DriverConfig::new(machine());
        let m = model(&src, &cfg);
        assert_eq!(
            (m.timing.method, m.timing.samples, m.timing.selection),
            ("wall", 11, "median")
        );
        assert_eq!((m.flush.method, m.flush.kib), ("clflush", 2 * 1024));
        assert_eq!(m.timing.min_interval_ns, 1_000_000);
        cfg.timing.samples = Some(3);
        cfg.timing.flush_kib = Some(100);
        cfg.timing.timer = Some(TimerMethod::Cycle);
        let m = model(&src, &cfg);
        assert_eq!((m.timing.method, m.timing.samples), ("cycle", 3));
        assert_eq!(m.flush.kib, 100);
        assert_eq!(m.flush.kib_source, "command line");
    }

    #[test]
    fn the_sampling_budget_comes_from_the_command_line_the_spec_or_the_default() {
        let cfg = DriverConfig::new(machine());
        assert_eq!(model(GEMM, &cfg).timing.sampling, DEFAULT_SAMPLING);
        let src = format!("{GEMM}timer={{ max_time=2s; stable=1%; }};\n");
        let s = model(&src, &cfg).timing.sampling;
        assert_eq!(
            (s.min_time_ms, s.max_time_ms, s.stable_pct),
            (100, 2000, 1.0)
        );
        assert_eq!(s.source, "spec timer={...}, the rest default");
        let mut cfg = cfg;
        cfg.timing.min_time_ms = Some(3000);
        let spec = spec_lang::parse(&src, "t.spec").unwrap();
        let err = DriverModel::from_spec(&spec, &cfg).unwrap_err().to_string();
        assert!(
            err.contains(
                "ends (2000 ms, spec timer={...}) before it starts (3000 ms, command line)"
            ),
            "{err}"
        );
        cfg.timing.max_time_ms = Some(4000);
        let s = model(&src, &cfg).timing.sampling;
        assert_eq!((s.min_time_ms, s.max_time_ms), (3000, 4000));
        assert_eq!(s.source, "spec timer={...} and command line");
    }

    #[test]
    fn flushing_off_flushes_nothing_and_keeps_warm_operands_warm() {
        let mut cfg = DriverConfig::new(machine());
        cfg.timing.flush = Some(FlushMethod::None);
        let m = model(GEMM, &cfg);
        let states: Vec<CacheState> = m.operands.iter().map(|o| o.cache).collect();
        use CacheState::*;
        assert_eq!(states, vec![Unflushed, Unflushed, Warm]);
        assert!(!m.flush.any_operand_flushed);
    }

    #[test]
    fn only_flush_operands_are_flushed_unless_the_command_line_asks() {
        let src = GEMM.replace("RANDOM, flush|align(16));\n  B", "RANDOM, align(16));\n  B");
        let m = model(&src, &DriverConfig::new(machine()));
        let states: Vec<CacheState> = m.operands.iter().map(|o| o.cache).collect();
        use CacheState::*;
        assert_eq!(states, vec![Unflushed, Flushed, Warm]);
        let a = m.operand("A").unwrap();
        assert!(!a.warm && !a.flushed);
        assert!(m.flush.any_operand_flushed);
        // The spec's timer clause only picks the method for `flush` operands.
        let clause = format!("{src}timer={{ flush=clflush; }};\n");
        let m = model(&clause, &DriverConfig::new(machine()));
        assert_eq!(m.operand("A").unwrap().cache, Unflushed);
        // --flush read|clflush on the command line: the cold context.
        let mut cfg = DriverConfig::new(machine());
        cfg.timing.flush = Some(FlushMethod::Clflush);
        let m = model(&src, &cfg);
        let states: Vec<CacheState> = m.operands.iter().map(|o| o.cache).collect();
        assert_eq!(states, vec![Flushed, Flushed, Warm]);
        // Nothing marked: no operand flushed, so no flush at all.
        let none = src.replace("flush|", "");
        let m = model(&none, &DriverConfig::new(machine()));
        assert!(!m.flush.any_operand_flushed);
    }

    #[test]
    fn a_scalar_without_init_is_one_and_says_why() {
        let src = "routine=void f(const int n, const double alpha, double* X);\ninit={ X=Vector(double, 0, _, n); };\n";
        let m = model(src, &DriverConfig::new(machine()));
        let n = m.scalars.iter().find(|s| s.name == "n").unwrap();
        assert_eq!(
            (n.init_c.as_str(), n.implicit_reason.is_some()),
            ("1", true)
        );
        let x = m.operand("X").unwrap();
        assert_eq!((x.cols_value, x.fill.kind), (Some(1), "const"));
        let text = crate::explain(&m);
        assert!(
            text.contains(
                "alpha (double) = 1: fixed for every call\n      no init in the spec: set to 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn scalars_are_initialised_after_what_they_use() {
        let src = r#"
routine=void f(const int a, const int b, const int c, double* X);
init={ a=b+c; b=c*2; c=3; X=Vector(double, ZERO, _, a); };
"#;
        let m = model(src, &DriverConfig::new(machine()));
        let order: Vec<&str> = m.scalars.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(order, vec!["c", "b", "a"]);
        assert_eq!(m.operand("X").unwrap().cols_value, Some(9));
    }
}
