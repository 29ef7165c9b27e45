//! The driver model: everything the generated driver will do, decided from
//! the spec and the configuration, before any C is written. Templates only
//! lay this out; `tdg explain` describes it in words.

use spec_lang::ast::{FlushMethod, TimerClause};

use crate::defaults::MachineDefaults;
use spec_lang::checked::CheckedSpec;

mod config;
mod error;
mod expr;
mod operands;
mod outputs;
mod routine;
mod scalars;
mod sourced;
mod timing;

pub use config::{DriverConfig, TimingOverrides};
pub use error::ModelError;
pub use expr::{CheckedExpr, ExprNames};
pub use operands::{elem_kind, CacheState, ElemKind, FillPlan, FillValue, OperandModel, Storage};
pub use outputs::{FlopPlan, OverflowGuard, VerifyPlan};
pub use routine::{CallArg, CallPlan, Reference, RoutineModel, RoutineParam};
pub use scalars::{MacroDefault, ScalarKind, ScalarModel};
pub use sourced::{Origin, Source, Sourced};
pub use timing::{
    Eviction, FlushPlan, SamplingPlan, TimingPlan, DEFAULT_MAX_TIME_MS, DEFAULT_MIN_TIME_MS,
    DEFAULT_SAMPLES, DEFAULT_STABLE_PCT, FLUSH_OVERSIZE,
};

/// Serialized as it is for `tdg explain --format json`.
#[derive(Debug, Clone, serde::Serialize)]
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
    /// The routine's call, made by the timed loop, the dummy call and the
    /// two verification calls.
    pub calls: CallPlan,
    /// True when some scalar changes per call (Range/RANDOM).
    pub per_call_scalars: bool,
    /// The `tdg_driver` version of the driver's `--json` line.
    pub json_version: u32,
    /// The names the model's expressions refer to, for the view to spell.
    #[serde(skip)]
    pub names: ExprNames,
    /// What the timing and flush plans were resolved from besides the
    /// caller's overrides, so that a run with other overrides resolves its
    /// own plan by the same rule ([`DriverModel::timing_for`]).
    #[serde(skip)]
    pub timing_inputs: TimingInputs,
}

/// The spec's `timer={...}` and the machine a model's timing was resolved from.
#[derive(Debug, Clone)]
pub struct TimingInputs {
    pub clause: TimerClause,
    pub machine: MachineDefaults,
}

impl DriverModel {
    /// The model of a checked spec (its `-D` overrides already applied):
    /// the one way into the model. A spec that does not serve a driver is
    /// refused with the checker's located diagnostics; nothing is checked
    /// again.
    pub fn from_checked(spec: &CheckedSpec, cfg: &DriverConfig) -> Result<DriverModel, ModelError> {
        spec.require(spec_lang::Use::Driver)
            .map_err(ModelError::Spec)?;
        build(spec, cfg)
    }

    /// The flush and timing plans a run under `overrides` resolves, by the
    /// same rule, from the same spec and machine as this model's: a built
    /// driver run with other settings (a flush sweep, a tuner's share of
    /// the sampling budget) reports where each of them came from.
    pub fn timing_for(
        &self,
        overrides: &TimingOverrides,
    ) -> Result<(FlushPlan, TimingPlan), ModelError> {
        let (mut flush, timing) = timing::resolve(
            overrides,
            &self.timing_inputs.clause,
            &self.timing_inputs.machine,
        )?;
        flush.any_operand_flushed = self.flush.any_operand_flushed;
        Ok((flush, timing))
    }

    pub fn operand(&self, name: &str) -> Option<&OperandModel> {
        self.operands.iter().find(|o| o.name == name)
    }
}

fn build(checked: &CheckedSpec, cfg: &DriverConfig) -> Result<DriverModel, ModelError> {
    let spec = &checked.spec;
    let names = ExprNames {
        scalars: checked
            .scalars
            .iter()
            .map(|s| (s.name.clone(), (s.expr.clone(), s.is_fixed())))
            .collect(),
        macros: checked
            .macros
            .iter()
            .map(|m| (m.name.clone(), m.default.clone()))
            .collect(),
    };
    let env = names.env();

    let macros = scalars::build_macros(checked, &env)?;
    let scalars = scalars::build_scalars(checked, &env)?;
    let timing_inputs = TimingInputs {
        clause: spec.timer.clone().unwrap_or_default(),
        machine: cfg.machine.clone(),
    };
    let (mut flush, timing) =
        timing::resolve(&cfg.timing, &timing_inputs.clause, &timing_inputs.machine)?;
    let flush_method = flush.method.value;

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
        operands.push(operands::build_operand(
            op,
            &env,
            flush_method,
            flush_unmarked,
        )?);
    }

    let verify = outputs::build_verify(checked, cfg);
    let guard = outputs::build_guard(spec, &scalars, &operands);
    let flop = match &spec.flop {
        Some(f) => Some(FlopPlan {
            text: f.text.clone(),
            expr: CheckedExpr::runtime(&f.expr, &env)?,
            value: checked.flop_count(),
        }),
        None => None,
    };

    let routine = routine::build_routine(spec, cfg.external_reference);
    let calls = routine::build_calls(spec, &operands, cfg.external_reference);
    let per_call_scalars = scalars.iter().any(|s| s.kind != ScalarKind::Fixed);
    flush.any_operand_flushed = operands.iter().any(|o| o.flushed());

    Ok(DriverModel {
        routine,
        includes: spec.includes.iter().map(|i| i.text.clone()).collect(),
        macros,
        scalars,
        operands,
        flush,
        timing,
        guard,
        verify,
        flop,
        calls,
        per_call_scalars,
        json_version: crate::driver_json::DRIVER_JSON_VERSION,
        names: names.clone(),
        timing_inputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cexpr;
    use spec_lang::ast::{CodeOffset, Selection, TimerMethod};

    fn machine() -> MachineDefaults {
        MachineDefaults::fixed_for_tests()
    }

    #[test]
    fn measured_full_flush_is_the_default_and_says_where_it_came_from() {
        let mut machine = machine();
        machine.full_flush_kib = Some(96 * 1024);
        machine.full_flush_source = "tdg probe: measured".into();
        let m = model(GEMM, &DriverConfig::new(machine.clone()));
        assert_eq!(m.flush.kib.value, 96 * 1024);
        assert_eq!(
            (m.flush.kib.source, m.flush.kib.detail.as_str()),
            (Source::Machine, "tdg probe: measured")
        );
        assert!(m.flush.to_memory);
        assert_eq!(
            m.timing.min_interval_ns.origin().to_string(),
            "machine: test machine"
        );
        // A cache level below the last still means that level's (effective)
        // size; the last level means the measured full flush. Only a flush
        // that reaches memory also clflushes the operands.
        let src = format!("{GEMM}timer={{ flush_size=L2; }};\n");
        let m = model(&src, &DriverConfig::new(machine.clone()));
        assert_eq!(m.flush.kib.value, 1024 * FLUSH_OVERSIZE);
        assert_eq!(m.flush.kib.source, Source::Spec);
        assert!(m.flush.kib.detail.contains("L2 size 1024 KiB"));
        assert!(!m.flush.to_memory);
        let src = format!("{GEMM}timer={{ flush_size=L3; }};\n");
        let m = model(&src, &DriverConfig::new(machine.clone()));
        assert_eq!(m.flush.kib.value, 96 * 1024);
        assert!(m.flush.to_memory);
        let src = format!("{GEMM}timer={{ flush_size=4M; }};\n");
        assert!(
            !model(&src, &DriverConfig::new(machine.clone()))
                .flush
                .to_memory
        );
        let mut cfg = DriverConfig::new(machine);
        cfg.timing.flush_kib = Some(96 * 1024);
        assert!(
            !model(GEMM, &cfg).flush.to_memory,
            "a chosen size is read as chosen"
        );
    }

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    fn a_full_flush_evicts_the_private_caches_and_the_tlb_whatever_the_l3() {
        let mut machine = machine();
        machine.full_flush_kib = Some(192 * 1024);
        machine.tlb_entries = 3072;
        machine.tlb_source = "probe".into();
        let at = |llc_kib: u64, full_kib: u64| {
            let mut m = machine.clone();
            m.caches.last_mut().unwrap().kib = llc_kib;
            m.full_flush_kib = Some(full_kib);
            model(GEMM, &DriverConfig::new(m)).flush
        };
        let (ours, xeon) = (at(32 * 1024, 192 * 1024), at(300 * 1024, 512 * 1024));
        let e = ours
            .eviction
            .clone()
            .expect("a flush to memory on x86 evicts by address");
        assert_eq!(
            ours.eviction, xeon.eviction,
            "the eviction grew with the L3"
        );
        // Twice the L2 (the largest level below the last) and twice the TLB.
        assert_eq!((e.read_kib, e.tlb_pages), (2 * 1024, 2 * 3072));
        assert!(e.read_source.contains("L2 1024 KiB"), "{}", e.read_source);
        assert!(
            e.tlb_source.contains("3072 TLB entries"),
            "{}",
            e.tlb_source
        );
        // The working sets of a multi-call sample still rotate through the
        // full flush size: they evict by volume.
        assert_eq!(xeon.kib.value, 512 * 1024);
        // A chosen size, an inner level or clflush alone: no eviction plan.
        let mut cfg = DriverConfig::new(machine.clone());
        cfg.timing.flush_kib = Some(4096);
        assert!(model(GEMM, &cfg).flush.eviction.is_none());
        let src = format!("{GEMM}timer={{ flush_size=L2; }};\n");
        assert!(model(&src, &DriverConfig::new(machine.clone()))
            .flush
            .eviction
            .is_none());
        let mut cfg = DriverConfig::new(machine);
        cfg.timing.flush = Some(FlushMethod::Clflush);
        assert!(model(GEMM, &cfg).flush.eviction.is_none());
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

    fn checked(src: &str, defines: &[(&str, &str)]) -> CheckedSpec {
        let defines: Vec<(String, String)> = defines
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        spec_lang::check_source(src, "t.spec", &defines).unwrap_or_else(|d| panic!("{d}"))
    }

    fn model(src: &str, cfg: &DriverConfig) -> DriverModel {
        DriverModel::from_checked(&checked(src, &[]), cfg).unwrap()
    }

    #[test]
    fn gemm_plan_follows_the_spec_and_the_overrides() {
        let cfg = DriverConfig::new(machine());
        let m = DriverModel::from_checked(&checked(GEMM, &[("MS", "100")]), &cfg).unwrap();
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
        assert_eq!(m.flush.kib.value, 2 * 32768);
        assert_eq!(m.timing.selection.value, Selection::Min);
        assert!(m.verify.is_none());
    }

    #[test]
    fn cpu_time_defaults_to_the_median_and_levels_size_the_flush() {
        let mut cfg = DriverConfig::new(machine());
        cfg.timing.timer = Some(TimerMethod::Cpu);
        cfg.timing.flush_level = Some(1);
        let m = model(GEMM, &cfg);
        assert_eq!(m.timing.selection.value, Selection::Median);
        assert_eq!(m.timing.selection.source, Source::Default);
        assert_eq!(m.flush.kib.value, 64);
        assert_eq!(m.flush.kib.source, Source::CommandLine);
        cfg.timing.flush_level = Some(4);
        assert!(matches!(
            DriverModel::from_checked(&checked(GEMM, &[]), &cfg),
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
        let t = &m.timing;
        assert_eq!(
            (t.method.value, t.samples.value, t.selection.value),
            (TimerMethod::Wall, 11, Selection::Median)
        );
        assert!(!t.samples_exact, "the spec's count is the least one");
        assert_eq!(
            (m.flush.method.value, m.flush.kib.value),
            (FlushMethod::Clflush, 2 * 1024)
        );
        assert_eq!(t.min_interval_ns.value, 1_000_000);
        for source in [
            t.method.source,
            t.samples.source,
            t.selection.source,
            t.min_interval_ns.source,
            m.flush.method.source,
            m.flush.kib.source,
        ] {
            assert_eq!(source, Source::Spec);
        }
        cfg.timing.samples = Some(3);
        cfg.timing.flush_kib = Some(100);
        cfg.timing.timer = Some(TimerMethod::Cycle);
        let m = model(&src, &cfg);
        assert_eq!(
            (m.timing.method.value, m.timing.samples.value),
            (TimerMethod::Cycle, 3)
        );
        assert!(m.timing.samples_exact, "--samples N takes exactly N");
        assert_eq!(m.flush.kib, Sourced::new(100, Source::CommandLine));
        assert_eq!(m.timing.method.source, Source::CommandLine);
        assert_eq!(m.timing.selection.source, Source::Spec);
    }

    #[test]
    fn the_code_offset_comes_from_the_command_line_the_spec_or_is_0() {
        let mut cfg = DriverConfig::new(machine());
        let t = model(GEMM, &cfg).timing;
        assert_eq!(t.code_offset, Sourced::new(0, Source::Default));
        let src = format!("{GEMM}timer={{ code_offset=0x650; }};\n");
        let t = model(&src, &cfg).timing;
        assert_eq!(t.code_offset, Sourced::new(1616, Source::Spec));
        cfg.timing.code_offset = CodeOffset::new(48);
        let t = model(&src, &cfg).timing;
        assert_eq!(t.code_offset, Sourced::new(48, Source::CommandLine));
        // The range is the type's: no offset outside a page can be asked for.
        assert_eq!(CodeOffset::new(i64::from(spec_lang::ast::CODE_PAGE)), None);
        assert!("4096".parse::<CodeOffset>().is_err());
        assert_eq!("0x650".parse::<CodeOffset>().map(CodeOffset::get), Ok(1616));
    }

    #[test]
    fn the_sampling_budget_comes_from_the_command_line_the_spec_or_the_default() {
        let cfg = DriverConfig::new(machine());
        let s = model(GEMM, &cfg).timing.sampling;
        assert_eq!(
            (s.min_time_ms, s.max_time_ms, s.stable_pct),
            (
                Sourced::new(DEFAULT_MIN_TIME_MS, Source::Default),
                Sourced::new(DEFAULT_MAX_TIME_MS, Source::Default),
                Sourced::new(DEFAULT_STABLE_PCT, Source::Default)
            )
        );
        let src = format!("{GEMM}timer={{ max_time=2s; stable=1%; }};\n");
        let s = model(&src, &cfg).timing.sampling;
        assert_eq!(
            (s.min_time_ms, s.max_time_ms, s.stable_pct),
            (
                Sourced::new(100, Source::Default),
                Sourced::new(2000, Source::Spec),
                Sourced::new(1.0, Source::Spec)
            )
        );
        let mut cfg = cfg;
        cfg.timing.min_time_ms = Some(3000);
        let err = DriverModel::from_checked(&checked(&src, &[]), &cfg)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "ends (2000 ms, spec timer={...}) before it starts (3000 ms, command line)"
            ),
            "{err}"
        );
        cfg.timing.max_time_ms = Some(4000);
        let s = model(&src, &cfg).timing.sampling;
        assert_eq!(
            (s.min_time_ms, s.max_time_ms),
            (
                Sourced::new(3000, Source::CommandLine),
                Sourced::new(4000, Source::CommandLine)
            )
        );
        assert_eq!(s.stable_pct.source, Source::Spec);
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
        assert_eq!(a.cache, CacheState::Unflushed);
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
            (
                n.init.as_ref().map(|e| cexpr::describe(&e.expr)),
                n.implicit_reason.is_some()
            ),
            (Some("1".to_string()), true)
        );
        let x = m.operand("X").unwrap();
        assert_eq!((x.cols_value, x.fill.kind), (Some(1), "const"));
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
