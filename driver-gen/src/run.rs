//! Build a generated driver against the user's implementation, run it and
//! turn its JSON line into a [`RunReport`].

use spec_lang::ast::FlushMethod;
use spec_lang::vocabulary::Keyword;
use spec_lang::CheckedSpec;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use toolchain::{BuildCache, CCompiler, CompileJob, Compiled, ToolchainError};

use crate::defaults::{recorded_defaults, MachineDefaults};
use crate::driver_json;
pub use crate::driver_json::DRIVER_JSON_VERSION;
use crate::driver_options as opt;
use crate::model::{
    DriverConfig, DriverModel, FlushPlan, ModelError, Source, TimingOverrides, TimingPlan,
};
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

#[derive(Debug, Clone, PartialEq)]
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
    /// Where the driver looks for the headers the spec's include= lines
    /// name, besides its own directory; `None`: the implementation's
    /// directory. A spec's body is written to a new scratch directory for
    /// every run, which holds no header and, on the include path, would
    /// give the driver and its runtime a new build-cache key every time
    /// (recompiled on every `tdg run` of such a spec): its caller passes
    /// the spec's own directory.
    pub header_dir: Option<PathBuf>,
}

/// The build cache beside the probe's result ([`probe::build_cache_path`]).
pub fn default_build_cache() -> PathBuf {
    probe::build_cache_path()
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
            header_dir: None,
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
    /// A run asked a built driver for a setting it cannot change without
    /// being built again.
    #[error("{0}; build the driver with these options instead")]
    Rebuild(String),
    /// Neither an implementation file nor a body in the spec to time.
    #[error("--impl FILE is required: the C file implementing `{routine}` (a spec whose routine has a body {{ ... }} runs without one, timing the body; so does a spec with a checkpoint clause)")]
    NoImplementation { routine: String },
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
            RunError::Model(_)
            | RunError::Render(_)
            | RunError::Placement(_)
            | RunError::Rebuild(_)
            | RunError::NoImplementation { .. } => Failure::Usage,
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

pub use crate::record::{
    BuildRecord, FlushEviction, OperandReport, RunReport, Sampling, SettingSources, TeamReport,
    Verification,
};

pub use spec_lang::ast::CODE_PAGE;

/// The settings one run of a built driver is resolved into.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub flush: FlushPlan,
    pub timing: TimingPlan,
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
    /// The compiler, flags and defines it was built with.
    pub built_with: BuildRecord,
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
/// defines. A define that makes a size impossible is refused by the driver
/// itself, as it is for `make DEFS=...` on a `tdg gen` driver; a spec loaded
/// with the command line's defines (`spec_lang::load`) has already refused
/// it, located.
pub fn build_driver(
    spec: &CheckedSpec,
    impl_c: &Path,
    opts: &RunOptions,
) -> Result<BuiltDriver, RunError> {
    build_model(model_for(spec, opts)?, impl_c, opts)
}

/// The model [`build_driver`] builds: the spec's, with the options' timing
/// and machine.
pub(crate) fn model_for(spec: &CheckedSpec, opts: &RunOptions) -> Result<DriverModel, RunError> {
    Ok(DriverModel::from_checked(spec, &opts.driver_config())?)
}

impl RunOptions {
    /// The model's configuration: these options over this machine's defaults.
    pub fn driver_config(&self) -> DriverConfig {
        let machine = self.machine.clone().unwrap_or_else(recorded_defaults);
        let mut cfg = DriverConfig::new(machine);
        cfg.timing = self.timing.clone();
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
    let not_found = |what: &str, file: &Path, flag: &str| {
        RunError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{what} {} not found; pass the C file that defines {} {flag}",
                file.display(),
                model.routine.symbol
            ),
        ))
    };
    if !impl_c.is_file() {
        return Err(not_found("implementation", impl_c, "with --impl"));
    }
    if let Some(reference) = opts.reference.as_deref().filter(|r| !r.is_file()) {
        return Err(not_found(
            "reference implementation",
            reference,
            "to compare with as --reference",
        ));
    }
    let started = std::time::Instant::now();
    let generated = render(&model, opts.templates_dir.as_deref())?;
    let dir = toolchain::scratch_dir("tdg-driver")?;
    generated.write_to(dir.path())?;
    let b = Builder {
        cc: CCompiler::find(opts.cc.as_deref()).map_err(|e| RunError::Toolchain(e.to_string()))?,
        cache: opts
            .build_cache
            .as_deref()
            .and_then(BuildCache::open_or_warn),
        dir: dir.path(),
        opts,
        impl_c,
        openmp: openmp_flag(&opts.cflags).map(str::to_string),
        stats: std::cell::RefCell::new(BuildStats::default()),
    };
    b.driver_objects(&model)?;
    b.user_objects(&model.routine.symbol)?;
    let exe = dir.path().join("driver");
    b.place(&model, &exe)?;
    let mut build = b.stats.into_inner();
    build.seconds = started.elapsed().as_secs_f64();
    Ok(BuiltDriver {
        built_with: BuildRecord {
            compiler: format!("{} ({})", b.cc.program, b.cc.version),
            impl_cflags: opts.cflags.clone(),
            defines: opts
                .defines
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
        },
        model,
        exe,
        build,
        _dir: Some(dir),
    })
}

/// One build of a driver: its compiler and cache, the directory it is
/// written in, and what the build took.
struct Builder<'a> {
    cc: CCompiler,
    cache: Option<BuildCache>,
    dir: &'a Path,
    opts: &'a RunOptions,
    impl_c: &'a Path,
    /// The implementation's OpenMP flag, which the driver's sources and the
    /// link then take too.
    openmp: Option<String>,
    stats: std::cell::RefCell<BuildStats>,
}

/// A compile failure in a user's file (implementation, extra, reference)
/// or in tdg's own.
fn user_build_error(file: &Path) -> impl FnOnce(ToolchainError) -> RunError + '_ {
    move |e| match e {
        ToolchainError::BuildFailed { stderr, .. } => RunError::ImplBuild {
            file: file.to_path_buf(),
            stderr,
        },
        other => RunError::Toolchain(other.to_string()),
    }
}

fn driver_build_error(e: ToolchainError) -> RunError {
    match e {
        ToolchainError::BuildFailed { stderr, .. } => RunError::DriverBuild { stderr },
        other => RunError::Toolchain(other.to_string()),
    }
}

impl Builder<'_> {
    fn obj(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Compiles one object through the build cache, counting it.
    fn compile(&self, job: &CompileJob) -> Result<(), ToolchainError> {
        match self.cc.compile_object(job, self.cache.as_ref())? {
            Compiled::Built => self.stats.borrow_mut().compiled += 1,
            Compiled::Reused => self.stats.borrow_mut().reused += 1,
        }
        Ok(())
    }

    /// Every -D as written, for the user's files.
    fn defines(&self) -> Vec<(String, Option<String>)> {
        self.opts
            .defines
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect()
    }

    /// The driver's own sources, with its fixed flags. The driver sees only
    /// the spec's macros, under its own prefixed names.
    fn driver_objects(&self, model: &DriverModel) -> Result<(), RunError> {
        let defines: Vec<(String, Option<String>)> = self
            .opts
            .defines
            .iter()
            .filter(|(k, _)| model.macros.iter().any(|m| &m.name == k))
            .map(|(k, v)| (crate::cexpr::macro_c_name(k), Some(v.clone())))
            .collect();
        let cflags: Vec<String> = DRIVER_CFLAGS
            .iter()
            .map(|s| s.to_string())
            .chain(self.openmp.clone())
            .collect();
        // The spec's include= lines usually name headers that sit next to
        // the implementation.
        let include_dirs: Vec<PathBuf> = std::iter::once(self.dir.to_path_buf())
            .chain(
                self.opts
                    .header_dir
                    .clone()
                    .or_else(|| self.impl_c.parent().map(Path::to_path_buf)),
            )
            .collect();
        // The runtime includes only its own headers and reads none of the
        // spec's macros: compiled without them, its object is one build
        // cache entry for every driver (a build of it is the driver's
        // slowest compile), and no header beside the implementation can
        // shadow a system header it includes.
        let jobs = [
            ("driver.c", defines, include_dirs),
            ("tdg_runtime.c", Vec::new(), vec![self.dir.to_path_buf()]),
        ];
        for (src, defines, include_dirs) in jobs {
            self.compile(&CompileJob {
                sources: vec![self.dir.join(src)],
                output: self.obj(&format!("{src}.o")),
                cflags: cflags.clone(),
                defines,
                include_dirs,
                object_only: true,
                ..Default::default()
            })
            .map_err(driver_build_error)?;
        }
        Ok(())
    }

    /// A user's C file becomes an object with the user's flags, its own
    /// directory on the include path.
    fn user_object(
        &self,
        src: &Path,
        defines: Vec<(String, Option<String>)>,
        out: &str,
    ) -> Result<(), RunError> {
        self.compile(&CompileJob {
            sources: vec![src.to_path_buf()],
            output: self.obj(out),
            cflags: self.opts.cflags.clone(),
            defines,
            include_dirs: src
                .parent()
                .map(|p| vec![p.to_path_buf()])
                .unwrap_or_default(),
            object_only: true,
            ..Default::default()
        })
        .map_err(user_build_error(src))
    }

    /// The implementation and extra sources, then the reference, whose
    /// definition of the routine becomes tdg_reference so both link.
    fn user_objects(&self, symbol: &str) -> Result<(), RunError> {
        let sources = std::iter::once(self.impl_c)
            .chain(self.opts.extra_sources.iter().map(PathBuf::as_path));
        for (i, src) in sources.enumerate() {
            self.user_object(src, self.defines(), &format!("impl{i}.o"))?;
        }
        if let Some(reference) = &self.opts.reference {
            let mut renamed = self.defines();
            renamed.push((symbol.to_string(), Some("tdg_reference".into())));
            self.user_object(reference, renamed, "reference.o")?;
        }
        Ok(())
    }

    /// Every object, the placement object right before the implementation's.
    fn objects(&self) -> Vec<PathBuf> {
        let mut objects = vec![
            self.obj("driver.c.o"),
            self.obj("tdg_runtime.c.o"),
            self.obj("tdg_code_place.o"),
        ];
        let users = 1 + self.opts.extra_sources.len();
        objects.extend((0..users).map(|i| self.obj(&format!("impl{i}.o"))));
        if self.opts.reference.is_some() {
            objects.push(self.obj("reference.o"));
        }
        objects
    }

    /// Links the driver with a placement section `pad` bytes long (it
    /// starts on a page).
    fn link(&self, exe: &Path, pad: u32) -> Result<(), RunError> {
        self.compile(&CompileJob {
            sources: vec![self.dir.join("tdg_code_place.S")],
            output: self.obj("tdg_code_place.o"),
            defines: vec![("TDG_CODE_OFFSET".into(), Some(pad.to_string()))],
            object_only: true,
            ..Default::default()
        })
        .map_err(driver_build_error)?;
        self.stats.borrow_mut().links += 1;
        self.cc
            .compile(&CompileJob {
                sources: self.objects(),
                output: exe.to_path_buf(),
                link_args: ["-lm", "-pthread"]
                    .into_iter()
                    .map(String::from)
                    .chain(self.openmp.clone())
                    .collect(),
                ..Default::default()
            })
            .map_err(user_build_error(self.impl_c))
    }

    /// Links the driver with the routine at the plan's code offset.
    fn place(&self, model: &DriverModel, exe: &Path) -> Result<(), RunError> {
        let timing = &model.timing;
        let symbol = &model.routine.symbol;
        let predicted = predicted_padding(&self.obj("impl0.o"), symbol, timing.code_offset.value);
        self.link(exe, predicted.unwrap_or(0))?;
        match place_routine(exe, symbol, timing.code_offset.value, predicted, |pad| {
            self.link(exe, pad)
        }) {
            // Not asked for (a toolchain that places code itself): the
            // driver still reports where the routine is.
            Err(RunError::Placement(why)) if timing.code_offset.source == Source::Default => {
                tracing::warn!("{why}");
                Ok(())
            }
            other => other,
        }
    }
}

/// The placement padding that puts `symbol` at `offset` past a page, from
/// the implementation's object alone: the placement section ends where the
/// object's `.text` begins, so the routine lands at the padding plus its
/// offset in that section. `None` when the routine is not in the object's
/// `.text` (another source defines it, or the compiler put it in a section
/// the linker moves elsewhere); the link then shows where it went and one
/// more link corrects it.
pub fn predicted_padding(object: &Path, symbol: &str, offset: u32) -> Option<u32> {
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

/// The driver's command line for one run: `--json`, the run-time switches
/// of `opts` (`--reps`, `--cold-code`, `--no-verify`, ...), and an option
/// for each timing setting of `run` that differs from the one the driver
/// was built with. A setting the build already holds is never sent again:
/// the driver decides nothing tdg resolved (the option parser of the
/// driver's runtime stays for `make`-built drivers run by hand). A setting
/// the driver cannot change without a new build is refused.
pub fn driver_args(
    built: &DriverModel,
    run: &RunPlan,
    opts: &RunOptions,
) -> Result<Vec<String>, RunError> {
    let (bf, bt) = (&built.flush, &built.timing);
    let (rf, rt) = (&run.flush, &run.timing);
    if rt.code_offset.value != bt.code_offset.value {
        return Err(RunError::Rebuild(format!(
            "the driver places the routine at page offset {} when it is linked, not {}",
            bt.code_offset.value, rt.code_offset.value
        )));
    }
    let mut a = vec![opt::JSON.switch()];
    a.extend(sampling_args(bt, rt));
    a.extend(flush_args(bf, rf)?);
    a.extend(interval_and_team_args(bt, rt)?);
    a.extend(switch_args(built, opts));
    Ok(a)
}

/// The timer, the statistic and the sampling budget, where they differ.
fn sampling_args(bt: &TimingPlan, rt: &TimingPlan) -> Vec<String> {
    let mut a = Vec::new();
    if rt.method.value != bt.method.value {
        a.push(opt::TIMER.with(rt.method.value.spelling()));
    }
    // The driver's parser picks the median for --timer=cpu unless told: a
    // new timer always comes with the plan's statistic.
    if rt.selection.value != bt.selection.value || rt.method.value != bt.method.value {
        a.push(opt::SELECT.with(rt.selection.value.spelling()));
    }
    if (rt.samples.value, rt.samples_exact) != (bt.samples.value, bt.samples_exact) {
        let option = if rt.samples_exact {
            opt::SAMPLES
        } else {
            opt::MIN_SAMPLES
        };
        a.push(option.with(rt.samples.value));
    }
    let (rs, bs) = (&rt.sampling, &bt.sampling);
    for (option, ran, built) in [
        (opt::MIN_TIME_MS, rs.min_time_ms.value, bs.min_time_ms.value),
        (opt::MAX_TIME_MS, rs.max_time_ms.value, bs.max_time_ms.value),
    ] {
        if ran != built {
            a.push(option.with(ran));
        }
    }
    if rs.stable_pct.value != bs.stable_pct.value {
        a.push(opt::STABLE_PCT.with(rs.stable_pct.value));
    }
    a
}

/// The flush, its size and its CPUs, where they differ; a flush meant to
/// reach memory is built in.
fn flush_args(bf: &FlushPlan, rf: &FlushPlan) -> Result<Vec<String>, RunError> {
    let mut a = Vec::new();
    if rf.method.value != bf.method.value {
        a.push(opt::FLUSH.with(rf.method.value.spelling()));
    }
    if (rf.kib.value, rf.to_memory) != (bf.kib.value, bf.to_memory) {
        if rf.to_memory {
            return Err(RunError::Rebuild(format!(
                "the driver reads a chosen {} KiB flush; a flush meant to reach memory ({} KiB, {}) is built in",
                bf.kib.value,
                rf.kib.value,
                rf.kib.origin()
            )));
        }
        // A size given at run time is read as given, with no clflush first.
        a.push(opt::FLUSH_KIB.with(rf.kib.value));
    }
    match (rf.all_cpus.value, bf.all_cpus.value) {
        (true, false) => a.push(opt::FLUSH_ALL_CPUS.switch()),
        (false, true) => a.push(opt::NO_FLUSH_ALL_CPUS.switch()),
        _ => {}
    }
    Ok(a)
}

/// The shortest interval, the pins and the team, where they differ; the
/// machine's interval is built in.
fn interval_and_team_args(bt: &TimingPlan, rt: &TimingPlan) -> Result<Vec<String>, RunError> {
    let mut a = Vec::new();
    if rt.min_interval_ns != bt.min_interval_ns {
        if rt.min_interval_is_machine_default() {
            return Err(RunError::Rebuild(format!(
                "the driver times intervals of at least {} ns ({}), not the machine's",
                bt.min_interval_ns.value,
                bt.min_interval_ns.origin()
            )));
        }
        a.push(opt::MIN_INTERVAL_NS.with(rt.min_interval_ns.value));
    }
    if rt.pin_cpus.value != bt.pin_cpus.value {
        let list: Vec<String> = rt.pin_cpus.value.iter().map(u32::to_string).collect();
        a.push(opt::PIN.with(list.join(",")));
    }
    if rt.threads.value != bt.threads.value {
        a.push(opt::THREADS.with(rt.threads.value));
    }
    if rt.first_touch_threads.value != bt.first_touch_threads.value {
        let who = if rt.first_touch_threads.value {
            "threads"
        } else {
            "main"
        };
        a.push(opt::FIRST_TOUCH.with(who));
    }
    Ok(a)
}

/// The run-time switches of `opts` (`--reps`, `--cold-code`, `--no-verify`,
/// ...) and a tolerance other than the build's.
fn switch_args(built: &DriverModel, opts: &RunOptions) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(t) = opts.timing.tolerance {
        if built.verify.as_ref().map(|v| v.tolerance) != Some(t) {
            a.push(opt::TOLERANCE.with(format!("{t:e}")));
        }
    }
    if let Some(r) = opts.reps {
        a.push(opt::REPS.with(r));
    }
    for (on, switch) in [
        (opts.cold_code, opt::COLD_CODE),
        (!opts.touch_pages, opt::NO_TOUCH),
        (!opts.dummy_call, opt::NO_DUMMY_CALL),
        (!opts.overflow_guard, opt::NO_OVERFLOW_GUARD),
        (!opts.verify, opt::NO_VERIFY),
    ] {
        if on {
            a.push(switch.switch());
        }
    }
    a
}

impl BuiltDriver {
    /// The settings a run under `opts` resolves: the model's own when the
    /// options' timing is the one the driver was built with.
    pub fn plan_for(&self, opts: &RunOptions) -> Result<RunPlan, RunError> {
        let (flush, timing) = self.model.timing_for(&opts.timing)?;
        Ok(RunPlan { flush, timing })
    }

    /// Runs the driver once with the run-time part of `opts`; timing
    /// settings that differ from the build's are passed to the driver.
    pub fn run(&self, opts: &RunOptions) -> Result<RunReport, RunError> {
        let plan = self.plan_for(opts)?;
        let mut cmd = Command::new(&self.exe);
        cmd.args(driver_args(&self.model, &plan, opts)?);
        // The team size for runtimes that read it before main: set here, the
        // driver need not start itself again to set it.
        for var in THREAD_COUNT_VARIABLES {
            cmd.env(var, plan.timing.threads.value.to_string());
        }
        match toolchain::run(&mut cmd, Some(opts.timeout)) {
            Ok(out) => self.report_from(&out.stdout, &plan),
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
                let report = self.report_from(&stdout, &plan).ok();
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

    /// The run's record: the driver's line as its reader read it, settled
    /// with the build and each setting with its source as `plan` resolved it.
    fn report_from(&self, stdout: &str, plan: &RunPlan) -> Result<RunReport, RunError> {
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .ok_or_else(|| RunError::BadOutput {
                why: "no JSON line".into(),
                stdout: stdout.chars().take(400).collect(),
            })?;
        let mut report = driver_json::parse(line).map_err(|why| RunError::BadOutput {
            why,
            stdout: line.chars().take(400).collect(),
        })?;
        report.settle(&self.built_with, &plan.flush, &plan.timing);
        Ok(report)
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
pub fn run_driver(
    spec: &CheckedSpec,
    impl_c: &Path,
    opts: &RunOptions,
) -> Result<RunReport, RunError> {
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

#[cfg(test)]
mod resolve_once {
    //! A timing setting reaches the driver once: baked into the build by the
    //! resolved plan, never sent again on the driver's command line.
    use super::*;
    use crate::model::Sourced;
    use spec_lang::ast::{Selection, TimerMethod};

    const DOT: &str = r#"
routine=double ddot(const int N, const double* X, const double* Y);
init={
  N=Macro(NS, 4096);
  X=Vector(double, RANDOM, flush|align(64), N);
  Y=Vector(double, RANDOM, flush|align(64), N);
};
"#;

    fn options(timing: TimingOverrides) -> RunOptions {
        RunOptions {
            timing,
            machine: Some(MachineDefaults::fixed_for_tests()),
            ..RunOptions::default()
        }
    }

    /// The model a build under `opts` bakes in, and the argv of a run of
    /// that build under `run`.
    fn argv(spec: &str, opts: &RunOptions, run: &RunOptions) -> Result<Vec<String>, RunError> {
        let spec = spec_lang::check_source(spec, "t.spec", &[]).unwrap();
        let built = model_for(&spec, opts).unwrap();
        let (flush, timing) = built.timing_for(&run.timing)?;
        driver_args(&built, &RunPlan { flush, timing }, run)
    }

    #[test]
    fn every_setting_the_build_holds_stays_off_the_drivers_command_line() {
        let o = options(TimingOverrides {
            timer: Some(TimerMethod::Wall),
            samples: Some(9),
            selection: Some(Selection::Median),
            flush: Some(FlushMethod::Read),
            flush_kib: Some(512),
            min_interval_ns: Some(50_000),
            min_time_ms: Some(20),
            max_time_ms: Some(40),
            stable_pct: Some(2.0),
            flush_all_cpus: true,
            pin_cpus: vec![0],
            threads: Some(1),
            first_touch_main: true,
            code_offset: spec_lang::ast::CodeOffset::new(48),
            ..TimingOverrides::default()
        });
        assert_eq!(argv(DOT, &o, &o).unwrap(), vec!["--json"]);
        let spec = format!(
            "{DOT}timer={{ method=wall; samples=9; select=median; flush=read; flush_size=512K; min_interval=50us; }};\n"
        );
        let o = options(TimingOverrides::default());
        assert_eq!(argv(&spec, &o, &o).unwrap(), vec!["--json"]);
        assert_eq!(argv(DOT, &o, &o).unwrap(), vec!["--json"]);
    }

    #[test]
    fn a_run_with_other_settings_sends_only_what_differs_from_the_build() {
        let built = options(TimingOverrides::default());
        // A flush sweep's size: read as given (no clflush), once.
        let mut sweep = built.clone();
        sweep.timing.flush_kib = Some(256);
        assert_eq!(
            argv(DOT, &built, &sweep).unwrap(),
            vec!["--json", "--flush-kib=256"]
        );
        // A new timer comes with the plan's statistic, so the driver's own
        // rule (the median for CPU time) is never applied a second time.
        let mut cpu = built.clone();
        cpu.timing.timer = Some(TimerMethod::Cpu);
        assert_eq!(
            argv(DOT, &built, &cpu).unwrap(),
            vec!["--json", "--timer=cpu", "--select=median"]
        );
        // A count fixed by the build runs adaptively again when a run asks
        // for no fixed count.
        let exact = options(TimingOverrides {
            samples: Some(5),
            ..TimingOverrides::default()
        });
        assert_eq!(
            argv(DOT, &exact, &built).unwrap(),
            vec!["--json", "--min-samples=7"]
        );
        let mut share = built.clone();
        share.timing.max_time_ms = Some(125);
        share.verify = false;
        assert_eq!(
            argv(DOT, &built, &share).unwrap(),
            vec!["--json", "--max-time-ms=125", "--no-verify"]
        );
    }

    #[test]
    fn a_setting_only_a_new_build_can_change_is_refused_not_half_applied() {
        let default = options(TimingOverrides::default());
        let with = |change: fn(&mut TimingOverrides)| {
            let mut o = default.clone();
            change(&mut o.timing);
            o
        };
        let chosen_flush = with(|t| t.flush_kib = Some(512));
        let placed = with(|t| t.code_offset = spec_lang::ast::CodeOffset::new(64));
        for (built, run, why) in [
            (&chosen_flush, &default, "a flush meant to reach memory"),
            (&default, &placed, "page offset 0"),
        ] {
            match argv(DOT, built, run) {
                Err(RunError::Rebuild(m)) => assert!(m.contains(why), "{m}"),
                other => panic!("expected a refusal naming {why}, got {other:?}"),
            }
        }
    }

    #[test]
    fn each_setting_carries_its_source_from_the_plan() {
        let spec = spec_lang::check_source(
            &format!("{DOT}timer={{ flush_size=512K; }};\n"),
            "t.spec",
            &[],
        )
        .unwrap();
        let kib = |o: &RunOptions| model_for(&spec, o).unwrap().flush.kib;
        let default = options(TimingOverrides::default());
        assert_eq!(kib(&default), Sourced::new(512, Source::Spec));
        let mut cli = default.clone();
        cli.timing.flush_kib = Some(96);
        assert_eq!(kib(&cli), Sourced::new(96, Source::CommandLine));
        let dot = spec_lang::check_source(DOT, "t.spec", &[]).unwrap();
        let m = model_for(&dot, &default).unwrap();
        assert_eq!(m.flush.kib.source, Source::Machine);
        assert_eq!(m.flush.method.source, Source::Default);
    }
}
