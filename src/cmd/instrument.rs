//! `tdg instrument SPEC -o DIR`: the profiling runtime plus the LD_PRELOAD
//! shim and the --wrap object for the spec's routine.
use super::CmdResult;
use instrument::{interpose, runtime};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Spec whose routine signature the interposers are generated from.
    #[arg(required_unless_present = "runtime_only")]
    spec: Option<PathBuf>,
    /// Directory to write into (created if missing).
    #[arg(short, long, default_value = "tdg-instrument")]
    output: PathBuf,
    /// Only the header and the static/shared runtime libraries (for programs
    /// that use the TDG_PROFILE markers).
    #[arg(long, conflicts_with = "spec")]
    runtime_only: bool,
    /// Include directory for the spec's include= clauses [default: the spec's directory].
    #[arg(short = 'I', value_name = "DIR")]
    include: Vec<PathBuf>,
    /// C compiler [default: $CC, cc, gcc, clang].
    #[arg(long)]
    cc: Option<String>,
}

pub fn run(a: Args) -> CmdResult {
    let cc = toolchain::CCompiler::find(a.cc.as_deref())?;
    // The runtime's writer makes the directory tdg's own, or refuses it.
    let dir = &a.output;
    let cache = toolchain::BuildCache::open_or_warn(&driver_gen::default_build_cache());
    let Some(spec_path) = a.spec else {
        let rt = runtime::build(&cc, dir, cache.as_ref())?;
        println!(
            "wrote {}/tdg_instrument.h, {} and {}",
            dir.display(),
            rt.static_lib.display(),
            rt.shared_lib.display()
        );
        println!(
            "use: #include \"tdg_instrument.h\", wrap a call in TDG_PROFILE(\"name\", \"n:i\", call, n), build with -I{} and link {} -lpthread; then `tdg profile -- ./app`",
            dir.display(),
            rt.static_lib.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let spec = spec_lang::load(&spec_path, &[])?.for_use(spec_lang::Use::Profile)?;
    let incs = interpose::include_dirs_for(&spec_path, &a.include);
    let built = interpose::build_interposers(&cc, &spec, dir, &incs, cache.as_ref())?;
    let recorded: Vec<String> = interpose::recorded_values(&spec)
        .iter()
        .map(|v| format!("{}:{}", v.param, v.kind.code()))
        .collect();
    println!(
        "routine {} (symbol {}), recorded values: {}",
        spec.routine.name.name,
        built.symbol,
        if recorded.is_empty() {
            "none".to_string()
        } else {
            recorded.join(", ")
        }
    );
    println!(
        "shared library routine: LD_PRELOAD={} TDG_PROFILE_OUT=prof.%p.tdgp ./app   (or: tdg profile --spec {} -- ./app)",
        built.preload_shim.display(),
        spec_path.display()
    );
    println!(
        "static link:            cc ... -Wl,--wrap={} {} {} -lpthread",
        built.symbol,
        built.wrap_object.display(),
        built.runtime.static_lib.display()
    );
    println!(
        "sources: {}, {}",
        built.preload_source.display(),
        built.wrap_source.display()
    );
    Ok(ExitCode::SUCCESS)
}
