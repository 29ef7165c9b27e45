//! Build a generated driver against the user's implementation, run it and
//! turn its JSON line into a [`RunReport`].

use serde::{Deserialize, Serialize};
use spec_lang::ast::{FlushMethod, Spec};
use spec_lang::vocabulary::Keyword;
use stats::Summary;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use toolchain::{BuildCache, CCompiler, CompileJob, Compiled, ToolchainError};

use crate::defaults::{recorded_defaults, MachineDefaults};
use crate::driver_json::{self, DriverJson};
pub use crate::driver_json::{
    OperandReport, Sampling, TeamReport, Verification, DRIVER_JSON_VERSION,
};
use crate::model::{DriverConfig, DriverModel, ModelError, TimingOverrides};
use crate::render::{render, RenderError};

/// Flags the driver's own sources are always built with: the product must be
/// warning-free under them.
pub const DRIVER_CFLAGS: &[&str] = &["-std=c99", "-O2", "-Wall", "-Wextra"];

/// The variables thread pools other than OpenMP's read at start-up; the
/// driver's runtime (tdg_threads_environment) sets the same list.
pub const THREAD_COUNT_VARIABLES: &[&str] = &[
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
];

/// The implementation's OpenMP flag (`-fopenmp`, `-fopenmp=libomp`,
/// `-qopenmp`), which the driver's own sources and the link then take too:
/// the driver sets the team size and pins the team through OpenMP itself.
pub fn openmp_flag(impl_cflags: &[String]) -> Option<&str> {
    impl_cflags.iter().map(String::as_str).find(|f| {
        *f == "-fopenmp" || f.starts_with("-fopenmp=") || *f == "-qopenmp" || *f == "-fiopenmp"
    })
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// C compiler (`--cc`); `None`: $CC, cc, gcc, clang.
    pub cc: Option<String>,
    /// Flags for the implementation only (the driver has fixed flags).
    pub cflags: Vec<String>,
    /// `-D NAME=VALUE`, applied to the driver and the implementation.
    pub defines: Vec<(String, String)>,
    /// Timer, samples, selection, flush, minimum interval, pinning and
    /// verification tolerance the caller imposes.
    pub timing: TimingOverrides,
    /// Force this many calls per sample.
    pub reps: Option<u64>,
    /// After a flush, leave the routine's code cold too (`--cold-code`); by
    /// default the driver re-warms the program's code, not its data.
    pub cold_code: bool,
    /// Write every operand page before timing (lazy page zeroing guard).
    pub touch_pages: bool,
    /// One untimed call before timing (instruction load guard).
    pub dummy_call: bool,
    pub overflow_guard: bool,
    pub verify: bool,
    pub timeout: Duration,
    pub templates_dir: Option<PathBuf>,
    /// More user sources linked with the implementation.
    pub extra_sources: Vec<PathBuf>,
    /// A second implementation of the routine whose outputs the
    /// implementation's are compared with (`--reference K.c`), instead of
    /// the spec's body; its definition is compiled as `tdg_reference`.
    pub reference: Option<PathBuf>,
    /// This machine's cache sizes, flush size and timer figures. `None`:
    /// [`recorded_defaults`] (the probe's cached result or sysfs; a library
    /// never starts a probe); the command line passes [`machine_defaults`].
    ///
    /// [`machine_defaults`]: crate::machine_defaults
    pub machine: Option<MachineDefaults>,
    /// Where compiled objects are kept for the next build
    /// ([`toolchain::BuildCache`]); `None` compiles everything every time.
    pub build_cache: Option<PathBuf>,
}

/// The build cache beside the probe's result: `$TDG_CACHE_DIR/builds`,
/// else `~/.cache/tdg/builds`.
pub fn default_build_cache() -> PathBuf {
    probe::cache_path().with_file_name("builds")
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            cc: None,
            cflags: vec!["-O2".into()],
            defines: Vec::new(),
            timing: TimingOverrides::default(),
            reps: None,
            cold_code: false,
            touch_pages: true,
            dummy_call: true,
            overflow_guard: true,
            verify: true,
            timeout: Duration::from_secs(300),
            templates_dir: None,
            extra_sources: Vec::new(),
            reference: None,
            machine: None,
            build_cache: Some(default_build_cache()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error("{0}")]
    Toolchain(String),
    #[error("the implementation {file} failed to compile:\n{stderr}")]
    ImplBuild { file: PathBuf, stderr: String },
    #[error("the generated driver failed to compile (a tdg bug or a bad include=/--templates):\n{stderr}")]
    DriverBuild { stderr: String },
    #[error("`{routine}` crashed with {signal_name} (signal {signal}) during: {phase}")]
    Crashed {
        routine: String,
        signal: i32,
        signal_name: String,
        phase: String,
        stderr: String,
    },
    #[error("verification FAILED: {detail}; the implementation does not compute what the spec's reference does")]
    VerificationFailed {
        detail: String,
        report: Box<Option<RunReport>>,
    },
    #[error("the driver exited with status {code}: {stderr}")]
    DriverFailed { code: i32, stderr: String },
    #[error("the driver ran longer than {seconds} s and was stopped; lower the sizes or --samples, or raise --timeout")]
    TimedOut { seconds: u64 },
    #[error("the driver printed no report I understand ({why}); output was: {stdout}")]
    BadOutput { why: String, stdout: String },
    #[error("{0}")]
    Placement(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A file or directory tdg writes (fsguard's message names the path: a
    /// directory tdg refuses to touch, or the call that failed).
    #[error("{0}")]
    Files(std::io::Error),
}

impl RunError {
    /// The contract's kind of this failure; `None` for I/O errors that say
    /// nothing about the candidate.
    pub fn failure(&self) -> Option<failure::Failure> {
        use failure::Failure;
        Some(match self {
            RunError::Model(_) | RunError::Render(_) | RunError::Placement(_) => Failure::Usage,
            RunError::Toolchain(_) => Failure::Environment,
            RunError::ImplBuild { .. } | RunError::DriverBuild { .. } => Failure::Compile,
            RunError::Crashed { .. }
            | RunError::DriverFailed { .. }
            | RunError::BadOutput { .. } => Failure::Crash,
            RunError::TimedOut { .. } => Failure::Timeout,
            RunError::VerificationFailed { .. } => Failure::Verification,
            RunError::Io(io) if io.kind() == std::io::ErrorKind::NotFound => Failure::Usage,
            RunError::Files(e) if fsguard::is_refusal(e) => Failure::Usage,
            RunError::Io(_) | RunError::Files(_) => return None,
        })
    }
}

/// The read of a full flush after the operands' clflush, as the driver ran
/// it, with where each size came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlushEviction {
    pub read_kib: u64,
    pub read_source: String,
    pub tlb_pages: u64,
    pub tlb_source: String,
}

pub use spec_lang::ast::CODE_PAGE;

/// Everything one driver run measured, serialisable for `--json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub routine: String,
    pub compiler: String,
    pub impl_cflags: Vec<String>,
    pub defines: Vec<String>,
    /// Timer used ("cycle", "wall", "cpu") and the one asked for.
    pub timer: String,
    pub timer_requested: String,
    pub tsc_hz: Option<f64>,
    pub tsc_hz_source: String,
    /// Empty-interval cost, subtracted from every sample.
    pub timer_overhead_ns: f64,
    pub timer_resolution_ns: f64,
    /// "single-call", "self-flushing" (R calls over rotating working sets) or
    /// "repeated" (R calls, same data).
    pub mode: String,
    pub reps_per_sample: u64,
    pub working_sets: u64,
    pub flush: String,
    pub flush_kib: u64,
    pub flush_kib_source: String,
    pub flush_all_cpus: bool,
    pub flush_cpus: Vec<i32>,
    /// A read flush meant to reach memory began with a clflush of the
    /// flushed operands (single-call mode, x86).
    #[serde(default)]
    pub flush_clflushes_operands: bool,
    /// After that clflush, what the read evicted instead of `flush_kib`:
    /// KiB read (the private caches) and pages touched (the TLB); `None`
    /// when it read `flush_kib`.
    #[serde(default)]
    pub flush_eviction: Option<FlushEviction>,
    /// Mean wall time of the cache preparation before each single-call
    /// sample (clflush, read, re-warming the code): what the flush costs
    /// per sample, outside the timed interval. `None` without one.
    #[serde(default)]
    pub flush_ns_per_sample: Option<f64>,
    pub min_interval_ns: u64,
    pub min_interval_source: String,
    /// Per-call nanoseconds of every sample, in order.
    pub samples_ns: Vec<f64>,
    pub sample_cpus: Vec<i32>,
    /// The driver's own statistics of `samples_ns` (its JSON line's `stats`);
    /// `n` is `samples_ns.len()`, which the JSON does not repeat, so a report
    /// read back from `tdg run --json` has `n = 0`.
    #[serde(with = "crate::summary_json")]
    pub stats: Summary,
    /// "min" or "median".
    pub selection: String,
    pub reported_ns: f64,
    pub reported_why: String,
    /// How far the estimator over the first half of the samples is from the
    /// one over the second half, in per cent of the reported figure: the
    /// run's own measure of how settled the figure is (`None`: too few
    /// samples to tell).
    pub uncertainty_pct: Option<f64>,
    /// The figure settled within the tolerance before the budget ran out.
    pub stable: bool,
    /// Why not, and what to do (empty when stable).
    pub unstable_reason: String,
    pub sampling: Sampling,
    /// "hot": after a flush the routine's code was re-warmed (operands stay
    /// cold); "cold": `--cold-code`, everything as the flush left it.
    pub code: String,
    /// The routine's address modulo 4096 in the driver: where its code fell
    /// against fetch blocks and pages (`TimingPlan::code_offset` chose it).
    #[serde(default)]
    pub code_page_offset: Option<u32>,
    pub flops_per_call: Option<f64>,
    pub mflops_best: Option<f64>,
    pub mflops_avg: Option<f64>,
    pub page_faults_during_timing: i64,
    pub pinned_cpu: Option<i32>,
    #[serde(flatten)]
    pub team: TeamReport,
    pub touch_pages: bool,
    pub dummy_call: bool,
    pub overflow_guard: String,
    pub outputs_finite: bool,
    /// Output values that became denormal during timing (not in the fill).
    pub outputs_denormal: i64,
    pub operands: Vec<OperandReport>,
    pub verification: Verification,
    pub warnings: Vec<String>,
}

/// What building a driver took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildStats {
    /// Sources the compiler compiled.
    pub compiled: u32,
    /// Objects taken from the build cache instead.
    pub reused: u32,
    /// Links (two when the predicted placement padding missed).
    pub links: u32,
    /// Wall time of the whole build, rendering included.
    pub seconds: f64,
}

/// A compiled driver, ready to run any number of times (a flush sweep
/// reuses one build).
pub struct BuiltDriver {
    pub model: DriverModel,
    pub exe: PathBuf,
    pub compiler: String,
    pub impl_cflags: Vec<String>,
    pub defines: Vec<String>,
    /// What building it took (empty for a driver opened from a kept copy).
    pub build: BuildStats,
    /// Where it was built (removed with the driver); `None` for a driver
    /// kept by [`BuiltDriver::keep`] and opened again.
    pub(crate) _dir: Option<toolchain::ScratchDir>,
}

/// Builds the driver for `spec` with the options' configuration.
///
/// The generated C is the same for every `-D` value: sizes are evaluated by
/// the driver at run time, and the options' defines reach it as compiler
/// defines. So the model is the spec's at its defaults, and a define that
/// makes a size impossible is refused by the driver itself, as it is for
/// `make DEFS=...` on a `tdg gen` driver. (`tdg run` checks the defines
/// against the spec before it gets here, so its users see a located error.)
pub fn build_driver(
    spec: &Spec,
    impl_c: &Path,
    opts: &RunOptions,
) -> Result<BuiltDriver, RunError> {
    build_model(model_for(spec, opts)?, impl_c, opts)
}

/// The model [`build_driver`] builds: the spec's at its defaults, with the
/// options' timing and machine.
pub(crate) fn model_for(spec: &Spec, opts: &RunOptions) -> Result<DriverModel, RunError> {
    let mut cfg = opts.driver_config();
    cfg.defines.clear();
    Ok(DriverModel::from_spec(spec, &cfg)?)
}

impl RunOptions {
    /// The model's configuration: these options over this machine's defaults.
    pub fn driver_config(&self) -> DriverConfig {
        let machine = self.machine.clone().unwrap_or_else(recorded_defaults);
        let mut cfg = DriverConfig::new(machine);
        cfg.timing = self.timing.clone();
        cfg.defines = self.defines.iter().cloned().collect();
        cfg.external_reference = self.reference.is_some();
        cfg
    }
}

/// Builds an already-made model (callers that adjust the model first).
pub fn build_model(
    model: DriverModel,
    impl_c: &Path,
    opts: &RunOptions,
) -> Result<BuiltDriver, RunError> {
    if !impl_c.is_file() {
        return Err(RunError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "implementation {} not found; pass the C file that defines {} with --impl",
                impl_c.display(),
                model.routine.symbol
            ),
        )));
    }
    let started = std::time::Instant::now();
    let generated = render(&model, opts.templates_dir.as_deref())?;
    let dir = toolchain::scratch_dir("tdg-driver")?;
    generated.write_to(dir.path())?;
    let cc = CCompiler::find(opts.cc.as_deref()).map_err(|e| RunError::Toolchain(e.to_string()))?;
    let cache = opts.build_cache.as_deref().and_then(|d| {
        BuildCache::open(d)
            .map_err(|e| tracing::warn!("{e}; building without the cache"))
            .ok()
    });
    let mut stats = BuildStats::default();
    let compile = |job: &CompileJob, stats: &mut BuildStats| -> Result<(), ToolchainError> {
        match cc.compile_object(job, cache.as_ref())? {
            Compiled::Built => stats.compiled += 1,
            Compiled::Reused => stats.reused += 1,
        }
        Ok(())
    };
    let defines: Vec<(String, Option<String>)> = opts
        .defines
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    // The driver sees only the spec's macros, under its own prefixed names;
    // the implementation gets every -D as written.
    let driver_defines: Vec<(String, Option<String>)> = opts
        .defines
        .iter()
        .filter(|(k, _)| model.macros.iter().any(|m| &m.name == k))
        .map(|(k, v)| (crate::cexpr::macro_c_name(k), Some(v.clone())))
        .collect();
    let obj = |n: &str| dir.path().join(n);
    let openmp = openmp_flag(&opts.cflags).map(str::to_string);
    let driver_cflags: Vec<String> = DRIVER_CFLAGS
        .iter()
        .map(|s| s.to_string())
        .chain(openmp.clone())
        .collect();
    for src in ["driver.c", "tdg_runtime.c"] {
        let job = CompileJob {
            sources: vec![dir.path().join(src)],
            output: obj(&format!("{src}.o")),
            cflags: driver_cflags.clone(),
            defines: driver_defines.clone(),
            // The spec's include= lines usually name headers that sit next
            // to the implementation.
            include_dirs: std::iter::once(dir.path().to_path_buf())
                .chain(impl_c.parent().map(Path::to_path_buf))
                .collect(),
            object_only: true,
            ..Default::default()
        };
        compile(&job, &mut stats).map_err(|e| match e {
            ToolchainError::BuildFailed { stderr, .. } => RunError::DriverBuild { stderr },
            other => RunError::Toolchain(other.to_string()),
        })?;
    }
    let mut objects = vec![
        obj("driver.c.o"),
        obj("tdg_runtime.c.o"),
        obj("tdg_code_place.o"),
    ];
    let mut user_sources = vec![impl_c.to_path_buf()];
    user_sources.extend(opts.extra_sources.iter().cloned());
    // A user's C file (implementation, extra source, reference) becomes an
    // object with the user's flags, its own directory on the include path.
    let user_object = |src: &Path,
                       defines: Vec<(String, Option<String>)>,
                       out: PathBuf,
                       stats: &mut BuildStats|
     -> Result<PathBuf, RunError> {
        let job = CompileJob {
            sources: vec![src.to_path_buf()],
            output: out.clone(),
            cflags: opts.cflags.clone(),
            defines,
            include_dirs: src
                .parent()
                .map(|p| vec![p.to_path_buf()])
                .unwrap_or_default(),
            object_only: true,
            ..Default::default()
        };
        compile(&job, stats).map_err(|e| match e {
            ToolchainError::BuildFailed { stderr, .. } => RunError::ImplBuild {
                file: src.to_path_buf(),
                stderr,
            },
            other => RunError::Toolchain(other.to_string()),
        })?;
        Ok(out)
    };
    for (i, src) in user_sources.iter().enumerate() {
        objects.push(user_object(
            src,
            defines.clone(),
            obj(&format!("impl{i}.o")),
            &mut stats,
        )?);
    }
    if let Some(reference) = &opts.reference {
        if !reference.is_file() {
            return Err(RunError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "reference implementation {} not found; pass the C file that defines {} to compare with as --reference",
                    reference.display(),
                    model.routine.symbol
                ),
            )));
        }
        // Its definition of the routine becomes tdg_reference, so both it
        // and the implementation link into one driver.
        let mut renamed = defines.clone();
        renamed.push((model.routine.symbol.clone(), Some("tdg_reference".into())));
        objects.push(user_object(
            reference,
            renamed,
            obj("reference.o"),
            &mut stats,
        )?);
    }
    let exe = dir.path().join("driver");
    let stats = std::cell::RefCell::new(stats);
    let link = |pad: u32| -> Result<(), RunError> {
        // The placement object sits right before the implementation's: its
        // section starts on a page and is `pad` bytes long.
        compile(
            &CompileJob {
                sources: vec![dir.path().join("tdg_code_place.S")],
                output: obj("tdg_code_place.o"),
                defines: vec![("TDG_CODE_OFFSET".into(), Some(pad.to_string()))],
                object_only: true,
                ..Default::default()
            },
            &mut stats.borrow_mut(),
        )
        .map_err(|e| match e {
            ToolchainError::BuildFailed { stderr, .. } => RunError::DriverBuild { stderr },
            other => RunError::Toolchain(other.to_string()),
        })?;
        stats.borrow_mut().links += 1;
        cc.compile(&CompileJob {
            sources: objects.clone(),
            output: exe.clone(),
            link_args: ["-lm", "-pthread"]
                .into_iter()
                .map(String::from)
                .chain(openmp.clone())
                .collect(),
            ..Default::default()
        })
        .map_err(|e| match e {
            ToolchainError::BuildFailed { stderr, .. } => RunError::ImplBuild {
                file: impl_c.to_path_buf(),
                stderr,
            },
            other => RunError::Toolchain(other.to_string()),
        })
    };
    let timing = &model.timing;
    let symbol = &model.routine.symbol;
    let predicted = predicted_padding(&obj("impl0.o"), symbol, timing.code_offset);
    link(predicted.unwrap_or(0))?;
    match place_routine(&exe, symbol, timing.code_offset, predicted, link) {
        // Not asked for (a toolchain that places code itself): the driver
        // still reports where the routine is.
        Err(RunError::Placement(why)) if timing.code_offset_source == "default" => {
            tracing::warn!("{why}")
        }
        other => other?,
    }
    let mut build = stats.into_inner();
    build.seconds = started.elapsed().as_secs_f64();
    Ok(BuiltDriver {
        model,
        exe,
        compiler: format!("{} ({})", cc.program, cc.version),
        impl_cflags: opts.cflags.clone(),
        defines: opts
            .defines
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        build,
        _dir: Some(dir),
    })
}

/// The placement padding that puts `symbol` at `offset` past a page, from
/// the implementation's object alone: the placement section ends where the
/// object's `.text` begins, so the routine lands at the padding plus its
/// offset in that section. `None` when the routine is not in the object's
/// `.text` (another source defines it, or the compiler put it in a section
/// the linker moves elsewhere); the link then shows where it went and one
/// more link corrects it.
fn predicted_padding(object: &Path, symbol: &str, offset: u32) -> Option<u32> {
    let within = toolchain::offset_in_text(object, symbol).ok()??;
    let page = u64::from(CODE_PAGE);
    Some(((u64::from(offset) + page - within % page) % page) as u32)
}

/// Moves the routine to `offset` bytes past a page in the driver linked with
/// the `predicted` padding (none without one): everything after the placement object moves by
/// the padding, so one more link with the difference puts the routine
/// there, whatever precedes it in its own file (none when it is there
/// already, as the predicted padding usually puts it). An offset the routine's alignment forbids
/// (odd, say, for a 16-byte-aligned function) is refused, not rounded.
fn place_routine(
    exe: &Path,
    symbol: &str,
    offset: u32,
    predicted: Option<u32>,
    link: impl Fn(u32) -> Result<(), RunError>,
) -> Result<(), RunError> {
    let pad = predicted.unwrap_or(0);
    let page_offset = |exe: &Path| -> Result<Option<u32>, RunError> {
        let addr = toolchain::symbol_address(exe, symbol)
            .map_err(|e| RunError::Toolchain(e.to_string()))?;
        Ok(addr.map(|a| (a % u64::from(CODE_PAGE)) as u32))
    };
    let Some(at) = page_offset(exe)? else {
        return Err(RunError::Placement(format!(
            "`{symbol}` is not in the driver's symbol table, so its code cannot be placed"
        )));
    };
    if at == offset {
        return Ok(());
    }
    link((pad + offset + CODE_PAGE - at) % CODE_PAGE)?;
    match page_offset(exe)? {
        Some(now) if now == offset => Ok(()),
        // A predicted padding was the exact one: where it put the routine
        // is what the alignment did to the offset asked for.
        now => Err(RunError::Placement(format!(
            "`{symbol}` cannot start at page offset {offset}: it landed at {} (its alignment, or a link-time optimisation that places code itself); an address in the application always fits the alignment: take it modulo {CODE_PAGE} from `nm`",
            match (predicted, now) {
                (Some(_), _) => at.to_string(),
                (None, Some(n)) => n.to_string(),
                (None, None) => "an unknown offset".to_string(),
            }
        ))),
    }
}

/// Command-line arguments for the driver binary from the run-time options.
pub fn driver_args(opts: &RunOptions) -> Vec<String> {
    let mut a = vec!["--json".to_string()];
    if let Some(t) = opts.timing.timer {
        a.push(format!("--timer={}", t.spelling()));
    }
    if let Some(s) = opts.timing.samples {
        a.push(format!("--samples={s}"));
    }
    if let Some(s) = opts.timing.selection {
        a.push(format!("--select={}", s.spelling()));
    }
    if let Some(f) = opts.timing.flush {
        a.push(format!("--flush={}", f.spelling()));
    }
    if let Some(k) = opts.timing.flush_kib {
        a.push(format!("--flush-kib={k}"));
    }
    if let Some(m) = opts.timing.min_interval_ns {
        a.push(format!("--min-interval-ns={m}"));
    }
    if let Some(r) = opts.reps {
        a.push(format!("--reps={r}"));
    }
    if opts.cold_code {
        a.push("--cold-code".into());
    }
    if let Some(t) = opts.timing.min_time_ms {
        a.push(format!("--min-time-ms={t}"));
    }
    if let Some(t) = opts.timing.max_time_ms {
        a.push(format!("--max-time-ms={t}"));
    }
    if let Some(p) = opts.timing.stable_pct {
        a.push(format!("--stable-pct={p}"));
    }
    if !opts.timing.pin_cpus.is_empty() {
        let list: Vec<String> = opts.timing.pin_cpus.iter().map(u32::to_string).collect();
        a.push(format!("--pin={}", list.join(",")));
    }
    if let Some(n) = opts.timing.threads {
        a.push(format!("--threads={n}"));
    }
    if opts.timing.first_touch_main {
        a.push("--first-touch=main".into());
    }
    if opts.timing.flush_all_cpus {
        a.push("--flush-all-cpus".into());
    }
    if !opts.touch_pages {
        a.push("--no-touch".into());
    }
    if !opts.dummy_call {
        a.push("--no-dummy-call".into());
    }
    if !opts.overflow_guard {
        a.push("--no-overflow-guard".into());
    }
    if !opts.verify {
        a.push("--no-verify".into());
    }
    if let Some(t) = opts.timing.tolerance {
        a.push(format!("--tolerance={t:e}"));
    }
    a
}

impl BuiltDriver {
    /// Runs the driver once with the run-time part of `opts`.
    pub fn run(&self, opts: &RunOptions) -> Result<RunReport, RunError> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(driver_args(opts));
        // The team size for runtimes that read it before main: set here, the
        // driver need not start itself again to set it.
        let threads = opts.timing.threads.unwrap_or(self.model.timing.threads);
        for var in THREAD_COUNT_VARIABLES {
            cmd.env(var, threads.to_string());
        }
        match toolchain::run(&mut cmd, Some(opts.timeout)) {
            Ok(out) => self.report_from(&out.stdout),
            Err(ToolchainError::Crashed {
                signal,
                signal_name,
                stderr,
                ..
            }) => Err(RunError::Crashed {
                routine: self.model.routine.name.clone(),
                signal,
                signal_name: signal_name.to_string(),
                phase: last_phase(&stderr),
                stderr,
            }),
            Err(ToolchainError::Failed {
                code: 3, stdout, ..
            }) => {
                let report = self.report_from(&stdout).ok();
                let detail = report
                    .as_ref()
                    .map(|r| r.verification.detail.clone())
                    .unwrap_or_else(|| "see the driver's output".into());
                Err(RunError::VerificationFailed {
                    detail,
                    report: Box::new(report),
                })
            }
            Err(ToolchainError::Failed { code, stderr, .. }) => Err(RunError::DriverFailed {
                code,
                stderr: stderr
                    .lines()
                    .filter(|l| !l.starts_with("tdg-phase:"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            }),
            Err(ToolchainError::TimedOut { limit, .. }) => Err(RunError::TimedOut {
                seconds: limit.as_secs(),
            }),
            Err(other) => Err(RunError::Toolchain(other.to_string())),
        }
    }

    fn report_from(&self, stdout: &str) -> Result<RunReport, RunError> {
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .ok_or_else(|| RunError::BadOutput {
                why: "no JSON line".into(),
                stdout: stdout.chars().take(400).collect(),
            })?;
        let json = driver_json::parse(line).map_err(|why| RunError::BadOutput {
            why,
            stdout: line.chars().take(400).collect(),
        })?;
        Ok(self.report(json))
    }

    fn report(&self, j: DriverJson) -> RunReport {
        let m = &self.model;
        let reported_why = match (j.selection.as_str(), j.timer.as_str()) {
            ("median", "cpu") => {
                "median of the samples: CPU time errs in both directions, so extremes are dropped"
                    .to_string()
            }
            ("median", _) => "median of the samples (requested)".to_string(),
            (_, "cpu") => {
                "minimum of the samples (requested; CPU time usually wants the median)".to_string()
            }
            _ => "minimum of the samples: with wall-clock time, other activity only ever adds time"
                .to_string(),
        };
        let flops = j.flops_per_call.filter(|f| *f > 0.0);
        let mflops = |ns: f64| flops.filter(|_| ns > 0.0).map(|f| f / ns * 1e3);
        let flush_kib_source = if j.flush_kib == m.flush.kib {
            m.flush.kib_source.clone()
        } else {
            "command line".into()
        };
        let min_interval_source = if !j.min_interval_why.is_empty() {
            j.min_interval_why.clone()
        } else if j.min_interval_ns == m.timing.min_interval_ns {
            m.timing.min_interval_source.clone()
        } else {
            "command line".into()
        };
        RunReport {
            routine: j.routine,
            compiler: self.compiler.clone(),
            impl_cflags: self.impl_cflags.clone(),
            defines: self.defines.clone(),
            timer: j.timer,
            timer_requested: j.timer_requested,
            tsc_hz: j.tsc_hz.filter(|h| *h > 0.0),
            tsc_hz_source: j.tsc_hz_source,
            timer_overhead_ns: j.timer_overhead_ns.unwrap_or(0.0),
            timer_resolution_ns: j.timer_resolution_ns.unwrap_or(0.0),
            mode: j.mode,
            reps_per_sample: j.reps,
            working_sets: j.working_sets,
            flush: j.flush,
            flush_kib: j.flush_kib,
            flush_kib_source,
            flush_all_cpus: j.flush_all_cpus,
            flush_cpus: j.flush_cpus,
            flush_clflushes_operands: j.flush_clflushes_operands,
            flush_eviction: (j.flush_evict_kib > 0 || j.flush_evict_pages > 0).then(|| {
                let planned = m.flush.eviction.as_ref();
                let source = |same: bool, text: Option<&String>| match (same, text) {
                    (true, Some(t)) => t.clone(),
                    _ => "command line".to_string(),
                };
                FlushEviction {
                    read_kib: j.flush_evict_kib,
                    read_source: source(
                        planned.is_some_and(|e| e.read_kib == j.flush_evict_kib),
                        planned.map(|e| &e.read_source),
                    ),
                    tlb_pages: j.flush_evict_pages,
                    tlb_source: source(
                        planned.is_some_and(|e| e.tlb_pages == j.flush_evict_pages),
                        planned.map(|e| &e.tlb_source),
                    ),
                }
            }),
            flush_ns_per_sample: j.flush_ns_per_sample.filter(|t| *t > 0.0),
            min_interval_ns: j.min_interval_ns,
            min_interval_source,
            mflops_best: mflops(j.stats.min),
            mflops_avg: mflops(j.stats.mean),
            stats: Summary {
                n: j.samples_ns.len(),
                ..j.stats
            },
            samples_ns: j.samples_ns,
            sample_cpus: j.sample_cpus,
            selection: j.selection,
            reported_ns: j.reported_ns,
            reported_why,
            uncertainty_pct: j.uncertainty_pct,
            stable: j.stable,
            unstable_reason: j.unstable_reason,
            sampling: j.sampling,
            code: j.code,
            code_page_offset: u32::try_from(j.code_page_offset).ok(),
            flops_per_call: j.flops_per_call,
            page_faults_during_timing: j.page_faults_during_timing,
            pinned_cpu: (j.pinned_cpu >= 0).then_some(j.pinned_cpu),
            team: j.team,
            touch_pages: j.touch_pages,
            dummy_call: j.dummy_call,
            overflow_guard: j.overflow_guard,
            outputs_finite: j.outputs_finite,
            outputs_denormal: j.outputs_denormal,
            operands: j.operands,
            verification: j.verification,
            warnings: j.warnings,
        }
    }
}

fn last_phase(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("tdg-phase: "))
        .unwrap_or("start-up (before the first phase)")
        .to_string()
}

/// Builds, runs once and reports: the one-shot API.
pub fn run_driver(spec: &Spec, impl_c: &Path, opts: &RunOptions) -> Result<RunReport, RunError> {
    build_driver(spec, impl_c, opts)?.run(opts)
}

/// Times the same build at each flush size (KiB), in order.
pub fn flush_sweep(
    built: &BuiltDriver,
    opts: &RunOptions,
    kibs: &[u64],
) -> Result<Vec<RunReport>, RunError> {
    kibs.iter()
        .map(|k| {
            let mut o = opts.clone();
            o.timing.flush_kib = Some(*k);
            if *k > 0 && o.timing.flush == Some(FlushMethod::None) {
                o.timing.flush = Some(FlushMethod::Read);
            }
            built.run(&o)
        })
        .collect()
}
